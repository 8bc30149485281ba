package source

import (
	"bytes"
	"encoding/json"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
	corev1 "k8s.io/api/core/v1"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/compare"
	"github.com/readyspan/readyspan/internal/captures"
)

// withNode copies a capture of the kubelet matrix and adds to its recording the Node its Pods
// ran on, as a recording of every namespace would hold it: its status.nodeInfo is the capture's
// own node-info.json (what the node reported when the capture was made).
func withNode(t *testing.T, name string) string {
	t.Helper()
	dir := captures.Copy(t, name, nil)
	raw, err := os.ReadFile(filepath.Join(dir, "node-info.json"))
	if err != nil {
		t.Fatal(err)
	}
	var info bytes.Buffer
	if err := json.Compact(&info, raw); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(dir, "watch.pods.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		Object struct {
			Spec struct {
				NodeName string `json:"nodeName"`
			} `json:"spec"`
		} `json:"object"`
		Recv time.Time `json:"recv"`
	}
	if err := json.Unmarshal([]byte(strings.SplitN(string(first), "\n", 2)[0]), &line); err != nil {
		t.Fatal(err)
	}
	node := line.Object.Spec.NodeName
	if node == "" {
		node = "readyspan-node"
	}
	created := line.Recv.Add(-time.Hour).UTC().Format(time.RFC3339)
	nodeLine := `{"type":"ADDED","object":{"apiVersion":"v1","kind":"Node","metadata":{"name":"` + node +
		`","uid":"00000000-0000-4000-8000-00000000000a","resourceVersion":"1","creationTimestamp":"` + created + `"},` +
		`"status":{"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"` + created + `"}],"nodeInfo":` +
		info.String() + `}},"recv":"` + line.Recv.Add(-time.Second).UTC().Format(time.RFC3339Nano) + "\"}\n"
	if err := os.WriteFile(filepath.Join(dir, "watch.nodes.jsonl"), []byte(nodeLine), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func load(t *testing.T, dir string) compare.Set {
	t.Helper()
	s, err := Path(dir, tracer.Config{}, false)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pulledRE reads the kubelet's message for an image it pulled (its image manager's wording,
// as tracer's evidence tests read it).
var pulledRE = regexp.MustCompile(`^Successfully pulled image "[^"]+" in \S+ \((\S+) including waiting\)\. Image size: (\d+) bytes\.$`)

// kubeletPulls reads, from a capture's own Events, what the kubelet said of each Pod's pull:
// the length including the wait, and the image's size; a Pod whose image was present has none.
func kubeletPulls(t *testing.T, dir string, pods map[string]bool) (lengths map[string]time.Duration, sizes []int64) {
	t.Helper()
	var events struct{ Items []corev1.Event }
	b, err := os.ReadFile(filepath.Join(dir, "events.core.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &events); err != nil {
		t.Fatal(err)
	}
	lengths = map[string]time.Duration{}
	for _, e := range events.Items {
		name := e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		if e.Reason != "Pulled" || !pods[name] {
			continue
		}
		m := pulledRE.FindStringSubmatch(e.Message)
		if m == nil {
			continue
		}
		d, err := time.ParseDuration(m[1])
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseInt(m[2], 10, 64)
		lengths[name] += d
		sizes = append(sizes, n)
	}
	return lengths, sizes
}

func names(s compare.Set) map[string]bool {
	m := map[string]bool{}
	for _, p := range s.Pods {
		m[p.Name] = true
	}
	return m
}

func rowOf(t *testing.T, res *compare.Result, span string) *compare.Row {
	t.Helper()
	for i := range res.Rows {
		if res.Rows[i].Span == span {
			return &res.Rows[i]
		}
	}
	t.Fatalf("no row %s", span)
	return nil
}

// TestColdAgainstWarm compares the capture of cold pulls (imagePullPolicy Always) with the one
// of warm ones (IfNotPresent, "already present"): the comparison lands in the image pull, names
// the image cache first, and states the pull's shift and the images' size as the kubelet's own
// Pulled messages in the captures' Events do.
func TestColdAgainstWarm(t *testing.T) {
	coldDir, warmDir := captures.Path("run3-always-pull"), captures.Path("run2-ifnotpresent")
	cold, warm := load(t, coldDir), load(t, warmDir)
	res, err := compare.Compare(cold, warm, compare.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Sentence)
	if strings.Join(res.Lead, " ") != phases.PhaseKubelet+" "+phases.SpanImagePull {
		t.Fatalf("the shift lands in %v", res.Lead)
	}
	at := res.Attribution[len(res.Attribution)-1]
	top := at.Dims[0]
	if at.Span != phases.SpanImagePull || top.Dim != "image_cache" || !top.Separates {
		t.Fatalf("attribution of %s: first %+v", at.Span, top)
	}
	// The kubelet's own figures: the cold side's Pods pulled, the warm side's found the image
	// present. The pull's shift it states holds their difference, and all of it is the cache's.
	coldPulls, sizes := kubeletPulls(t, coldDir, names(cold))
	warmPulls, _ := kubeletPulls(t, warmDir, names(warm))
	if len(coldPulls) != len(cold.Pods) || len(warmPulls) != 0 {
		t.Fatalf("the captures' Events: %d pulls on the cold side (%d Pods), %d on the warm", len(coldPulls), len(cold.Pods), len(warmPulls))
	}
	var sum time.Duration
	for _, d := range coldPulls {
		sum += d
	}
	kubeletShift := -(sum / time.Duration(len(coldPulls))).Seconds()
	pull := rowOf(t, res, phases.SpanImagePull).Stats[compare.StatMean]
	if kubeletShift < pull.Shift.Low || kubeletShift > pull.Shift.High {
		t.Errorf("the kubelet's pulls shift the mean by %.4f s, outside the interval stated %+v", kubeletShift, pull.Shift)
	}
	if top.Share.Low > 1 || top.Share.High < 1 {
		t.Errorf("every pull of the shift was a cold one, yet the cache's share is %+v", top.Share)
	}
	var mean float64
	for _, n := range sizes {
		mean += float64(n) / float64(len(sizes))
	}
	if res.A.ImageBytes != mean || res.B.ImageBytes != 0 {
		t.Errorf("image sizes %v and %v; the kubelet said %v and none", res.A.ImageBytes, res.B.ImageBytes, mean)
	}
	for _, want := range []string{"Image cache (cold → warm)", "confounded with image and namespace", phases.SpanImagePull, "1.1 MB"} {
		if !strings.Contains(res.Sentence, want) {
			t.Errorf("the sentence does not say %q: %s", want, res.Sentence)
		}
	}
}

// TestKubeletVersions compares the 1.34 kubelet's capture with the 1.37 one's, each with its
// node as the capture's node-info.json states it: the kubelet version comes first, with the
// versions the nodes reported, confounded with the namespace (each capture has its own); the
// runtime, the same containerd on both, is no difference.
func TestKubeletVersions(t *testing.T) {
	var versions []string
	for _, c := range []string{"kubelet-1.34", "kubelet-1.37"} {
		var info struct{ KubeletVersion, ContainerRuntimeVersion string }
		b, err := os.ReadFile(filepath.Join(captures.Path(c), "node-info.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &info); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, info.KubeletVersion)
	}
	old, cur := load(t, withNode(t, "kubelet-1.34")), load(t, withNode(t, "kubelet-1.37"))
	res, err := compare.Compare(old, cur, compare.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Sentence)
	for _, at := range res.Attribution {
		top := at.Dims[0]
		if top.Dim != "kubelet_version" || strings.Join(top.ConfoundedWith, ",") != "namespace" || !top.Separates {
			t.Errorf("%s: first %+v", at.Span, top)
		}
		for _, d := range at.Dims {
			if d.Dim == "container_runtime" || d.Dim == "node" {
				t.Errorf("%s: %s differs, yet both nodes report the same", at.Span, d.Dim)
			}
		}
	}
	want := "Kubelet version (" + versions[0] + " → " + versions[1] + ")"
	if !strings.Contains(res.Sentence, want) || !strings.Contains(res.Sentence, "confounded with namespace") {
		t.Errorf("the sentence does not say %q: %s", want, res.Sentence)
	}
	// A Pod a side never pulled its image (it does not exist): counted, not compared (the
	// capture ends before readyspan's default --fail-after, so it is still in progress).
	if old.NotReady["in-progress"] != 1 || cur.NotReady["in-progress"] != 1 || len(old.Pods) != 3 || len(cur.Pods) != 3 {
		t.Errorf("not ready: %v, %v", old.NotReady, cur.NotReady)
	}
}
