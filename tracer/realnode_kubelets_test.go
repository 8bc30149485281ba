package tracer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/readyspan/readyspan/phases"
)

// The kubelet version matrix: one capture per node the local cluster ran
// (testdata/real-node/kubelet-<minor>[-containerd-<version>], made by
// deploy/local/scripts/capture-kubelet.sh against a v1.37 control plane). Each holds four Pods:
// cold (an image pulled anew), warm (an image already on the node), missing (an image the
// registry lacks: ErrImagePull, then ImagePullBackOff) and probes (a startup probe passing after
// ~2 s, readiness after ~4 s); readyspan's recording (watch streams), List snapshots of the Pods
// and Events at the end, the kubelet's own CRI spans (kubelet-cri-spans.jsonl) and the Node's
// nodeInfo (node-info.json). Each is judged against what that kubelet itself stated, so a
// kubelet release that words its messages differently fails here, not in a user's cluster.

// kubeletDirs lists the matrix's captures.
func kubeletDirs(t *testing.T) []string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join("testdata", "real-node", "kubelet-*"))
	var dirs []string
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.IsDir() {
			dirs = append(dirs, m)
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no kubelet captures in testdata/real-node")
	}
	return dirs
}

// criSpansIn reads a capture's kubelet CRI spans, by Pod, in start order. RuntimeService methods
// lose their package prefix ("RunPodSandbox"), ImageService ones keep it.
func criSpansIn(t *testing.T, dir string) map[string][]criSpan {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "kubelet-cri-spans.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]criSpan{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var s criSpan
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		s.Name = strings.TrimPrefix(s.Name, "runtime.v1.RuntimeService/")
		out[s.Pod] = append(out[s.Pod], s)
	}
	return out
}

const criPullImage, criImageStatus = "runtime.v1.ImageService/PullImage", "runtime.v1.ImageService/ImageStatus"

// firstEnd is the end of the first call of method that ends at or after from.
func firstEnd(spans []criSpan, method string, from time.Time) (time.Time, bool) {
	for _, s := range spans {
		if s.Name == method && !s.end().Before(from) {
			return s.end(), true
		}
	}
	return time.Time{}, false
}

// nextCall is the first CRI call that starts at or after from.
func nextCall(spans []criSpan, from time.Time) (criSpan, bool) {
	for _, s := range spans {
		if !s.start().Before(from) {
			return s, true
		}
	}
	return criSpan{}, false
}

// The messages of the kubelet's image manager that say no pull happened: with the
// KubeletEnsureSecretPulledImages gate on (beta, default since 1.35) and off (1.34).
var presentRE = regexp.MustCompile(`^Container image "[^"]+" already present on machine( and can be accessed by the pod)?$`)

// kubeletSpanSlack is how far a boundary readyspan reads from an event the kubelet emits right
// after a CRI call may lie from that call's own span: the e2e suite's tolerance
// (TestKubeletSpansAgree).
const kubeletSpanSlack = 5 * time.Millisecond

// TestRealNodeKubeletVersions replays each capture of the matrix (golden beside it) and holds it
// against the capture's own evidence: every event-name and event-time boundary and every pull
// figure (checkEvidence), and for each Pod what its kubelet stated and did.
func TestRealNodeKubeletVersions(t *testing.T) {
	for _, dir := range kubeletDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var info struct {
				KubeletVersion, ContainerRuntimeVersion string
			}
			readJSON(t, filepath.Join(dir, "node-info.json"), &info)
			minor, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), "kubelet-"), "-")
			if !strings.HasPrefix(info.KubeletVersion, "v"+minor+".") {
				t.Fatalf("the capture's node runs kubelet %s, not %s", info.KubeletVersion, minor)
			}
			if _, rt, ok := strings.Cut(filepath.Base(dir), "-containerd-"); ok && !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://"+rt+".") {
				t.Fatalf("the capture's runtime is %s, not containerd %s", info.ContainerRuntimeVersion, rt)
			}
			t.Logf("kubelet %s, runtime %s", info.KubeletVersion, info.ContainerRuntimeVersion)

			// Failures after 20 s, as in the e2e suite: the capture shows the missing
			// image's back-off for longer than that, not the default 2 minutes.
			traces := replayDirWith(t, dir, Config{Backfill: true, FailAfter: 20 * time.Second})
			spans, waterfall := render(t, traces)
			if again, _ := render(t, replayDirWith(t, dir, Config{Backfill: true, FailAfter: 20 * time.Second})); !bytes.Equal(spans, again) {
				t.Fatal("replay is not deterministic")
			}
			golden(t, dir+".txtar", spans, waterfall)
			if n := checkEvidence(t, dir, traces); n == 0 {
				t.Fatal("no boundary was checked against the capture")
			}
			ev := readEvidence(t, dir)
			var pods struct{ Items []corev1.Pod }
			readJSON(t, filepath.Join(dir, "pods.json"), &pods)
			status := map[string]corev1.PodStatus{}
			for _, p := range pods.Items {
				status[p.Name] = p.Status
			}
			byName := map[string]*phases.Trace{}
			for _, tr := range traces {
				checkShape(t, tr)
				byName[tr.Pod.Name] = tr
			}
			cri := criSpansIn(t, dir)
			for _, name := range []string{"cold", "warm", "missing", "probes"} {
				if byName[name] == nil {
					t.Fatalf("no trace of Pod %s", name)
				}
			}

			// What the kubelet said about each image, read from the events with a regexp of
			// the test's own: a cold pull states its times and size, a present image says so.
			pulled := func(pod string) rawEvent {
				t.Helper()
				e, ok := ev.first(byName[pod].Pod.UID, "app", "Pulled")
				if !ok {
					t.Fatalf("%s: no Pulled event", pod)
				}
				return e
			}
			if m := pulledRE.FindStringSubmatch(pulled("cold").Message); m == nil {
				t.Errorf("cold: the kubelet's Pulled message %q states no pull times and size in the known format", pulled("cold").Message)
			}
			for _, pod := range []string{"warm", "probes"} {
				if msg := pulled(pod).Message; !presentRE.MatchString(msg) {
					t.Errorf("%s: the kubelet's Pulled message %q does not say the image was present in a known format", pod, msg)
				}
			}

			for _, pod := range []string{"cold", "warm", "probes"} {
				t.Run(pod, func(t *testing.T) {
					tr, calls := byName[pod], cri[pod]
					if tr.Summary.Outcome != phases.OutcomeReady {
						t.Errorf("outcome %s, want ready", tr.Summary.Outcome)
					}
					pull := tr.Find("container/app/image_pull")
					if pull == nil {
						t.Fatal("no image_pull span")
					}
					want := map[string]string{"cold": "cold", "warm": "warm", "probes": "warm"}[pod]
					if got := pull.Attr(phases.AttrImageCache); got != want {
						t.Errorf("image_pull %s = %v, want %s", phases.AttrImageCache, got, want)
					}
					transfer := tr.Find("container/app/image_pull/transfer")
					pulls := 0
					for _, s := range calls {
						if s.Name == criPullImage {
							pulls++
						}
					}
					if (transfer != nil) != (pulls > 0) || pulls > 1 {
						t.Errorf("a transfer span: %v; the kubelet's PullImage calls: %d", transfer != nil, pulls)
					}

					// The runtime's own stamp of the container's start (whole seconds on the
					// wire): the kubelet emits Started after StartContainer returned.
					var startedAt time.Time
					for _, cs := range status[pod].ContainerStatuses {
						if cs.Name == "app" && cs.State.Running != nil {
							startedAt = cs.State.Running.StartedAt.Time
						}
					}
					started := tr.Find("container/app/start")
					if startedAt.IsZero() || started == nil {
						t.Fatalf("no running app container (%v) or no start span", startedAt)
					}
					if started.End.Before(startedAt) || started.End.After(startedAt.Add(time.Second+kubeletSpanSlack)) {
						t.Errorf("start ends %s, outside the runtime's startedAt second %s (+%v)", started.End.Format(time.StampMicro), startedAt.Format(time.Stamp), kubeletSpanSlack)
					}

					if len(calls) == 0 {
						t.Fatal("the capture has no CRI spans of the kubelet for this Pod")
					}
					near := func(what string, got, kubelet time.Time) {
						t.Helper()
						d := got.Sub(kubelet)
						t.Logf("%s: readyspan %s, kubelet %s (%+v)", what, got.Format(time.StampMicro), kubelet.Format(time.StampMicro), d)
						if d > kubeletSpanSlack || d < -kubeletSpanSlack {
							t.Errorf("%s: %v apart, tolerance %v", what, d, kubeletSpanSlack)
						}
					}
					within := func(what string, got, from, to time.Time) {
						t.Helper()
						t.Logf("%s: %s, kubelet [%s, %s]", what, got.Format(time.StampMicro), from.Format(time.StampMicro), to.Format(time.StampMicro))
						if got.Before(from.Add(-time.Millisecond)) || got.After(to.Add(time.Millisecond)) {
							t.Errorf("%s %s is outside [%s, %s] ± 1ms", what, got.Format(time.StampMicro), from.Format(time.StampMicro), to.Format(time.StampMicro))
						}
					}
					create, ok1 := nth(calls, "CreateContainer", time.Time{}, 0)
					start, ok2 := nth(calls, "StartContainer", time.Time{}, 0)
					sandbox, ok3 := nth(calls, "RunPodSandbox", time.Time{}, 0)
					if !ok1 || !ok2 || !ok3 {
						t.Fatalf("the capture lacks RunPodSandbox, CreateContainer or StartContainer: %v", calls)
					}
					near("create end vs CreateContainer end", tr.Find("container/app/create").End, create.end())
					near("start end vs StartContainer end", started.End, start.end())
					// The sandbox ends at the kubelet's first container event, emitted after
					// sandbox ready (RunPodSandbox, PodSandboxStatus) and its image check, before
					// its next CRI call (PullImage, or the ImageStatus reading the image's user).
					ready := sandbox.end()
					if st, ok := firstEnd(calls, "PodSandboxStatus", ready); ok {
						ready = st
					}
					checked, ok := firstEnd(calls, criImageStatus, ready)
					next, ok2 := nextCall(calls, checked)
					if !ok || !ok2 {
						t.Fatalf("no image check and call after sandbox ready: %v", calls)
					}
					within("sandbox end", tr.Find("kubelet.sandbox").End, ready, next.start())
					if transfer != nil {
						pullCall, _ := nth(calls, criPullImage, time.Time{}, 0)
						near("transfer start vs PullImage start", transfer.Start, pullCall.start())
						sized, ok := firstEnd(calls, criImageStatus, pullCall.end())
						after, ok2 := nextCall(calls, sized)
						if !ok || !ok2 {
							t.Fatalf("no image-size check and call after PullImage: %v", calls)
						}
						within("transfer end (Pulled)", transfer.End, pullCall.end(), after.start())
					}
				})
			}

			t.Run("missing", func(t *testing.T) {
				tr := byName["missing"]
				if tr.Summary.Outcome != phases.OutcomeFailed {
					t.Errorf("outcome %s, want failed", tr.Summary.Outcome)
				}
				root := tr.Root()
				if !strings.Contains(root.StatusMessage, "ErrImagePull") && !strings.Contains(root.StatusMessage, "ImagePullBackOff") {
					t.Errorf("status %q names neither ErrImagePull nor ImagePullBackOff", root.StatusMessage)
				}
				failed, ok := ev.first(tr.Pod.UID, "app", "Failed")
				if !ok || !strings.HasPrefix(failed.Message, `Failed to pull image "`) {
					t.Errorf("the kubelet's first Failed event %q is not the known pull failure", failed.Message)
				}
				want := failedPullsInCapture(t, dir)[tr.Pod.UID]
				if want == 0 || tr.Summary.PullsFailed != want {
					t.Errorf("failed pulls %d, the capture's events show %d", tr.Summary.PullsFailed, want)
				}
				pull := tr.Find("container/app/image_pull")
				if pull == nil || pull.Status != phases.StatusError {
					t.Errorf("the image_pull span is missing or not an error: %+v", pull)
				}
			})

			t.Run("probe results", func(t *testing.T) {
				tr := byName["probes"]
				sp, rd := tr.Find("container/app/startup_probe"), tr.Find("container/app/readiness")
				if sp == nil || rd == nil {
					t.Fatal("no startup_probe or readiness span")
				}
				// The container makes the startup probe's file 2 s after it starts and the
				// readiness probe's 2 s later; the kubelet's Unhealthy events say the startup
				// probe failed until then, in its own words.
				unhealthy := 0
				for _, e := range ev.events {
					if e.AboutUID == tr.Pod.UID && e.Reason == "Unhealthy" {
						unhealthy++
						if !strings.HasPrefix(e.Message, "Startup probe failed") && !strings.HasPrefix(e.Message, "Readiness probe failed") {
							t.Errorf("Unhealthy message %q is in no known format", e.Message)
						}
					}
				}
				if unhealthy == 0 {
					t.Error("no Unhealthy event: the probes never failed, the capture proves nothing of them")
				}
				if d := sp.End.Sub(sp.Start); d < 1500*time.Millisecond || d > 4*time.Second {
					t.Errorf("startup_probe lasted %v, the container made its file 2 s after it started", d)
				}
				if d := rd.End.Sub(sp.Start); d < 3500*time.Millisecond || d > 7*time.Second {
					t.Errorf("readiness ends %v after the container started, the container was ready to pass 4 s after", d)
				}
			})
		})
	}
}

// The README's compatibility table is made from the captures, never by hand: this test renders
// it from each capture's own JSON (the kubelet's messages, the Pod's conditions, the kubelet's
// CRI spans, the Node's nodeInfo) and fails when the README says otherwise (-update rewrites it).
const (
	matrixBegin = "<!-- kubelet-matrix:begin (go test ./tracer -run TestKubeletMatrixTable -update) -->\n"
	matrixEnd   = "<!-- kubelet-matrix:end -->\n"
)

func TestKubeletMatrixTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("| kubelet | runtime | pull time, with waiting (Pulled) | image size (Pulled) | image already present (Pulled) | Created, Started | sandbox ready (PodReadyToStartContainers) | the kubelet's CRI spans | pull failure |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, dir := range kubeletDirs(t) {
		b.WriteString(matrixRow(t, dir))
	}
	readme := filepath.Join("..", "README.md")
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok1 := strings.Cut(string(data), matrixBegin)
	old, after, ok2 := strings.Cut(rest, matrixEnd)
	if !ok1 || !ok2 {
		t.Fatalf("README.md has no kubelet matrix between %q and %q", matrixBegin, matrixEnd)
	}
	if *update {
		if err := os.WriteFile(readme, []byte(before+matrixBegin+b.String()+matrixEnd+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if old != b.String() {
		t.Errorf("README.md's kubelet matrix is not what the captures show; want:\n%s\ngot:\n%s", b.String(), old)
	}
}

// matrixRow is one capture's row of the table, read from its JSON alone.
func matrixRow(t *testing.T, dir string) string {
	t.Helper()
	var info struct{ KubeletVersion, ContainerRuntimeVersion string }
	readJSON(t, filepath.Join(dir, "node-info.json"), &info)
	runtime := strings.TrimSuffix(strings.Replace(info.ContainerRuntimeVersion, "://", " ", 1), "+unknown")
	ev := readEvidence(t, dir)
	uid := map[string]string{}
	for _, p := range ev.pods {
		uid[p.Name] = p.UID
	}
	msg := func(pod, reason string) string {
		e, ok := ev.first(uid[pod], "app", reason)
		if !ok {
			return ""
		}
		return e.Message
	}
	transfer, size := "not stated", "not stated"
	if m := pulledRE.FindStringSubmatch(msg("cold", "Pulled")); m != nil {
		transfer, size = m[1]+", "+m[2], m[3]+" bytes"
	}
	present := "not stated"
	if m := presentRE.FindStringSubmatch(msg("warm", "Pulled")); m != nil {
		present = "`…already present on machine" + m[1] + "`"
	}
	sandbox := "not set"
	if at := ev.pods[uid["cold"]].SandboxSecond; !at.IsZero() {
		// The condition's whole second against the kubelet's own events of the cold Pod.
		pulling, ok1 := ev.first(uid["cold"], "app", "Pulling")
		started, ok2 := ev.first(uid["cold"], "app", "Started")
		switch {
		case ok1 && !at.After(pulling.NameTime):
			sandbox = "True before the pull"
		case ok2 && !at.Before(started.NameTime.Truncate(time.Second)):
			sandbox = "True only after the containers started"
		default:
			sandbox = "True, after the pull began"
		}
	}
	// Which of the Pods' steps the kubelet traced: its CRI calls under syncPod, and its probes'
	// exec calls where it traces those per Pod.
	methods := map[string]bool{}
	for _, spans := range criSpansIn(t, dir) {
		for _, s := range spans {
			methods[s.Name] = true
		}
	}
	var traced []string
	for _, m := range []struct{ method, step string }{{"RunPodSandbox", "sandbox"}, {criPullImage, "pull"}, {"CreateContainer", "create"}, {"StartContainer", "start"}, {"ExecSync", "probe execs"}} {
		if methods[m.method] {
			traced = append(traced, m.step)
		}
	}
	cri := "none"
	if len(traced) > 0 {
		cri = strings.Join(traced, ", ")
	}
	var failures []string
	for _, e := range ev.events {
		if e.AboutUID == uid["missing"] && e.Reason == "Failed" && strings.HasPrefix(e.Message, "Error: ") && !slices.Contains(failures, strings.TrimPrefix(e.Message, "Error: ")) {
			failures = append(failures, strings.TrimPrefix(e.Message, "Error: "))
		}
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s | `%s`, `%s` | %s | %s | %s |\n", info.KubeletVersion, runtime, transfer, size, present,
		msg("warm", "Created"), msg("warm", "Started"), sandbox, cri, strings.Join(failures, " → "))
}

// TestRealNodeSandboxWithoutEvents replays each capture of the matrix with its Events left out
// (expired, or a readyspan started late) and holds kubelet.sandbox to the kubelet's own CRI
// spans: an end it calls observed lies within the whole second of PodReadyToStartContainers
// after the sandbox was ready (RunPodSandbox's end), never seconds later. Kubelets before 1.36
// set that condition only once the containers started, so there it states nothing of the
// sandbox, and the end must be marked not observed.
func TestRealNodeSandboxWithoutEvents(t *testing.T) {
	for _, dir := range kubeletDirs(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			bare := t.TempDir()
			for _, f := range []string{"watch.pods.jsonl", "pods.json"} {
				data, err := os.ReadFile(filepath.Join(dir, f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(bare, f), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cri := criSpansIn(t, dir)
			traces := replayDirWith(t, bare, Config{Backfill: true, FailAfter: 20 * time.Second})
			checked := 0
			for _, tr := range traces {
				calls := cri[tr.Pod.Name]
				var ready time.Time
				for _, s := range calls {
					if s.Name == "RunPodSandbox" {
						ready = s.end()
						break
					}
				}
				sb := tr.Find(phases.SpanKubeletSandbox)
				if ready.IsZero() || sb == nil {
					continue
				}
				checked++
				observed := sb.Attr(phases.AttrObserved) != false
				late := sb.End.Sub(ready)
				t.Logf("%s: sandbox end %s (observed %v), RunPodSandbox ended %s: %v later", tr.Pod.Name, sb.End.Format(time.StampMicro), observed, ready.Format(time.StampMicro), late)
				if observed && (late < -time.Millisecond || late > time.Second+100*time.Millisecond) {
					t.Errorf("%s: kubelet.sandbox ends %v after the kubelet's sandbox was ready, yet is marked observed", tr.Pod.Name, late)
				}
			}
			if checked == 0 {
				t.Fatal("no Pod of the capture has both a sandbox span and the kubelet's RunPodSandbox")
			}
		})
	}
}
