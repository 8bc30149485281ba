package daemon

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/otlpin"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
)

// captureDir is a real run on the local cluster (otlpin/testdata/README.md): a Deployment's
// Pods and bare Pods, the components' spans as Jaeger forwarded them, readyspan's recording and
// the audit log of the same run.
var captureDir = filepath.Join("..", "otlpin", "testdata", "capture-chain")

// readRequests reads a capture of OTLP requests: each a uvarint length and an
// ExportTraceServiceRequest (gzip-compressed as a whole when the name ends in .gz).
func readRequests(t *testing.T, path string) []*collectortrace.ExportTraceServiceRequest {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		if r, err = gzip.NewReader(f); err != nil {
			t.Fatal(err)
		}
	}
	br := bufio.NewReader(r)
	var out []*collectortrace.ExportTraceServiceRequest
	for {
		n, err := binary.ReadUvarint(br)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatal(err)
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		out = append(out, &req)
	}
}

// original is a received span as the capture holds it, read straight from the protobuf.
type original struct {
	service, name string
	trace, parent string
	start, end    time.Time
	attrs         map[string]string
}

// originals indexes every span of the capture by its span ID (hex), read without otlpin.
func originals(reqs []*collectortrace.ExportTraceServiceRequest) (map[string]*original, map[string][]*original) {
	byID, byTrace := map[string]*original{}, map[string][]*original{}
	for _, req := range reqs {
		for _, rs := range req.ResourceSpans {
			service := ""
			for _, a := range rs.Resource.Attributes {
				if a.Key == "service.name" {
					service = a.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					o := &original{service: service, name: s.Name, trace: hex.EncodeToString(s.TraceId), parent: hex.EncodeToString(s.ParentSpanId),
						start: time.Unix(0, int64(s.StartTimeUnixNano)), end: time.Unix(0, int64(s.EndTimeUnixNano)), attrs: map[string]string{}}
					for _, a := range s.Attributes {
						o.attrs[a.Key] = a.Value.GetStringValue()
					}
					byID[hex.EncodeToString(s.SpanId)] = o
					byTrace[o.trace] = append(byTrace[o.trace], o)
				}
			}
		}
	}
	return byID, byTrace
}

// auditObject is what the audit log says a request was about: its objectRef, and for a Pod's
// create (logged with its response) the Pod's UID.
type auditObject struct {
	namespace, name, uid string
}

func readAudit(t *testing.T, path string) map[string]auditObject {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]auditObject{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			AuditID   string `json:"auditID"`
			ObjectRef struct {
				Namespace, Name string
			} `json:"objectRef"`
			ResponseObject struct {
				Metadata struct{ Name, UID string } `json:"metadata"`
			} `json:"responseObject"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		o := auditObject{namespace: e.ObjectRef.Namespace, name: e.ObjectRef.Name}
		if o.name == "" {
			o.name = e.ResponseObject.Metadata.Name
		}
		o.uid = e.ResponseObject.Metadata.UID
		out[e.AuditID] = o
	}
	return out
}

// TestJoinRealCapture joins the components' spans of a real run into the Pod traces replayed
// from the recording of the same run, through the same stage the daemon runs, and checks every
// joined span against evidence the join does not read: each apiserver span's request, by its
// audit ID, in the audit log (the objectRef; for a controller's create, the Pod its response
// returned), each kubelet and containerd span's trace holding the kubelet's syncPod of the
// Pod's own UID, and each copy's start and end against its original. None may be joined to
// another Pod, and every Pod must have the steps the run made: its create request (the
// controller's or the user's), the Binding, its status writes, the syncPod with its CRI calls
// and containerd's sandbox and network setup beneath them.
func TestJoinRealCapture(t *testing.T) {
	reqs := readRequests(t, filepath.Join(captureDir, "components.otlp.gz"))
	byID, byTrace := originals(reqs)
	audit := readAudit(t, filepath.Join(captureDir, "recording", "audit.jsonl"))
	deltas, err := tracer.Kinds.LoadRecording(filepath.Join(captureDir, "recording"))
	if err != nil {
		t.Fatal(err)
	}
	var traces []*phases.Trace
	c := tracer.New(tracer.Config{Backfill: true}, tracer.SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil)
	tracer.Replay(c, deltas)

	store := otlpin.NewStore(time.Hour, 0, nil)
	for _, req := range reqs {
		store.Add(otlpin.Decode(req))
	}
	var joined []*phases.Trace
	stage := newJoinStage(store, time.Hour, func(tr *phases.Trace) { joined = append(joined, tr) }, nil, nil)
	for _, tr := range traces {
		stage.pod(tr)
	}
	stage.flush()
	if len(joined) != len(traces) || len(traces) < 7 {
		t.Fatalf("%d traces out of the stage, %d in; want every one of the capture's (at least 7)", len(joined), len(traces))
	}

	wrong, total := 0, 0
	for _, tr := range joined {
		pod := tr.Pod
		count := map[string]int{}
		var sync, sandbox *original
		for i := range tr.Spans {
			s := &tr.Spans[i]
			if s.StartBound.Source != phases.SourceComponentSpan {
				continue
			}
			count[s.Name]++
			if s.Name == phases.SpanKubeletVolumes {
				continue
			}
			total++
			if len(s.Links()) != 1 {
				t.Errorf("%s: %s has %d links, want 1 to its original", pod.Name, s.Name, len(s.Links()))
				continue
			}
			l := s.Links()[0]
			o := byID[l.SpanID.String()]
			if o == nil || o.trace != l.TraceID.String() {
				t.Errorf("%s: %s links to %s/%s, which the capture does not hold", pod.Name, s.Name, l.TraceID, l.SpanID)
				continue
			}
			if !s.Start.Equal(o.start) || !s.End.Equal(o.end) {
				t.Errorf("%s: %s is %s–%s, its original %s–%s", pod.Name, s.Name, s.Start, s.End, o.start, o.end)
			}
			switch o.service {
			case "apiserver":
				id := ""
				for _, sib := range byTrace[o.trace] {
					if v := sib.attrs["audit-id"]; v != "" {
						id = v
					}
				}
				a, ok := audit[id]
				switch {
				case !ok:
					t.Errorf("%s: %s (request %s) is not in the audit log", pod.Name, s.Name, id)
					wrong++
				case a.namespace != pod.Namespace || a.name != pod.Name || a.uid != "" && a.uid != pod.UID:
					t.Errorf("%s: %s joined from request %s on %s/%s (uid %q)", pod.Name, s.Name, id, a.namespace, a.name, a.uid)
					wrong++
				}
			case "kubelet", "containerd":
				own := false
				for _, sib := range byTrace[o.trace] {
					if sib.name == "syncPod" && sib.attrs["k8s.pod.uid"] == pod.UID {
						own = true
						if strings.HasSuffix(o.name, "RunPodSandbox") || sync == nil {
							sync = sib
						}
					}
				}
				if !own {
					t.Errorf("%s: %s (%s) is not in a kubelet trace of UID %s", pod.Name, s.Name, o.name, pod.UID)
					wrong++
				}
				if o.service == "kubelet" && strings.HasSuffix(o.name, "/RunPodSandbox") {
					sandbox = o
				}
			default:
				t.Errorf("%s: %s copied from %s", pod.Name, s.Name, o.service)
				wrong++
			}
		}
		want := map[string]int{
			phases.SpanAPIBinding: 1, phases.SpanKubeletSyncPod: 1, phases.SpanKubeletVolumes: 1,
			phases.SpanCRIRunPodSandbox: 1, phases.SpanCRICreateContainer: 1, phases.SpanCRIStartContainer: 1,
			phases.SpanContainerdSandbox: 1, phases.SpanContainerdNetworkSetup: 1,
		}
		if pod.Root == phases.RootBarePod {
			want[phases.SpanAPIRequest] = 1
		} else {
			want[phases.SpanAPIPodCreate] = 1
			want[phases.SpanCRIPullImage] = 1 // imagePullPolicy Always
		}
		for name, n := range want {
			if count[name] != n {
				t.Errorf("%s (%s): %d %s spans joined, want %d", pod.Name, pod.Root, count[name], name, n)
			}
		}
		if count[phases.SpanAPIStatusWrite] == 0 || count[phases.SpanAPIStorage] < 3 || count[phases.SpanAPIAuthz] < 3 {
			t.Errorf("%s: %d status writes, %d etcd writes, %d authorizations joined; want the status writes and each request's steps",
				pod.Name, count[phases.SpanAPIStatusWrite], count[phases.SpanAPIStorage], count[phases.SpanAPIAuthz])
		}
		if v := tr.Root().Attr(phases.AttrComponentsMissing); v != nil {
			t.Errorf("%s: marked missing %v, though the capture holds every component's spans", pod.Name, v)
		}
		// kubelet.volumes is the kubelet's syncPod start to its RunPodSandbox start.
		if sync != nil && sandbox != nil {
			for i := range tr.Spans {
				if s := &tr.Spans[i]; s.Name == phases.SpanKubeletVolumes && (!s.Start.Equal(sync.start) || !s.End.Equal(sandbox.start)) {
					t.Errorf("%s: kubelet.volumes %s–%s, want syncPod start %s to RunPodSandbox start %s", pod.Name, s.Start, s.End, sync.start, sandbox.start)
				}
			}
		}
		// The copies lie under the phase of their role.
		for i := range tr.Spans {
			s := &tr.Spans[i]
			if s.StartBound.Source != phases.SourceComponentSpan {
				continue
			}
			if got, want := phaseOf(tr, s), phaseFor(s.Name); want != "" && got != want {
				t.Errorf("%s: %s lies under %s, want %s", pod.Name, s.Name, got, want)
			}
		}
	}
	t.Logf("%d Pods, %d spans joined, %d to the wrong Pod", len(joined), total, wrong)
}

// phaseOf is the phase a span lies under.
func phaseOf(tr *phases.Trace, s *phases.Span) string {
	byID := map[phases.SpanID]*phases.Span{}
	for i := range tr.Spans {
		byID[tr.Spans[i].SpanID] = &tr.Spans[i]
	}
	for p := s; p != nil; p = byID[p.ParentSpanID] {
		if p.ParentSpanID == tr.Root().SpanID {
			return p.Name
		}
	}
	return ""
}

// phaseFor is the phase each role's span must lie under (the apiserver's steps: under their
// request, whichever phase).
func phaseFor(name string) string {
	switch name {
	case phases.SpanAPIRequest:
		return phases.PhaseAPIServer
	case phases.SpanAPIPodCreate:
		return phases.PhaseControllers
	case phases.SpanAPIBinding:
		return phases.PhaseScheduling
	case phases.SpanAPIStatusWrite:
		return phases.PhaseStatus
	case phases.SpanKubeletSyncPod, phases.SpanKubeletVolumes, phases.SpanCRIRunPodSandbox, phases.SpanCRIPullImage,
		phases.SpanCRICreateContainer, phases.SpanCRIStartContainer, phases.SpanContainerdSandbox, phases.SpanContainerdNetworkSetup:
		return phases.PhaseKubelet
	}
	return ""
}

// stageTrace is a finished trace of a Pod on a node: its root and six phases.
func stageTrace(uid string, t0 time.Time) *phases.Trace {
	tr := &phases.Trace{Pod: &phases.Pod{UID: uid, Name: uid, Namespace: "ns", Node: "n", Root: phases.RootBarePod}}
	tr.Pod.KubeletStarted.Add(t0, phases.SourceStatus)
	root := phases.Span{Name: phases.RootSpanName, SpanID: phases.SpanIDFor(uid, "r"), Start: t0, End: t0.Add(5 * time.Second)}
	tr.Spans = append(tr.Spans, root)
	for _, p := range phases.Phases {
		tr.Spans = append(tr.Spans, phases.Span{Name: p, SpanID: phases.SpanIDFor(uid, p), ParentSpanID: root.SpanID, Start: t0, End: t0.Add(time.Second)})
	}
	return tr
}

// kubeletSync is a kubelet trace of the Pod: syncPod and a CRI call beneath it.
func kubeletSync(trace byte, uid string, t0 time.Time) []phases.ComponentSpan {
	var tid phases.TraceID
	tid[0] = trace
	sync := phases.ComponentSpan{Service: phases.ServiceKubelet, TraceID: tid, SpanID: phases.SpanID{1}, Name: "syncPod", Start: t0, End: t0.Add(time.Second),
		Attrs: []phases.Attr{{Key: phases.AttrPodUID, Value: uid}}}
	cri := phases.ComponentSpan{Service: phases.ServiceKubelet, TraceID: tid, SpanID: phases.SpanID{2}, Parent: phases.SpanID{1},
		Name: "runtime.v1.RuntimeService/RunPodSandbox", Start: t0.Add(100 * time.Millisecond), End: t0.Add(200 * time.Millisecond)}
	return []phases.ComponentSpan{cri, sync}
}

// A finished trace waits for the spans it expects from the components that send: it goes on as
// soon as they are held, or at the wait's end without them, marked; a component that sends
// nothing is not waited for.
func TestJoinStageWaits(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	store := otlpin.NewStore(time.Hour, 0, nil)
	var out []*phases.Trace
	stage := newJoinStage(store, 10*time.Second, func(tr *phases.Trace) { out = append(out, tr) }, nil, nil)
	now := t0
	stage.now = func() time.Time { return now }
	store.SetNow(stage.now)

	// Just started, nothing heard from yet: a trace waits for every component, for the wait.
	stage.pod(stageTrace("a", t0))
	stage.step(false)
	if len(out) != 0 {
		t.Fatalf("%d traces out at once after the start, want none: the components have not had time to send", len(out))
	}
	now = now.Add(10 * time.Second)
	stage.step(false)
	if len(out) != 1 || out[0].Root().Attr(phases.AttrComponentsMissing) != "containerd,kube-apiserver,kubelet" {
		t.Fatalf("after the wait: %d traces out, missing %v", len(out), out[0].Root().Attr(phases.AttrComponentsMissing))
	}
	// Past the start, a component that sends nothing is not waited for.
	now = now.Add(time.Hour)
	stage.pod(stageTrace("z", t0))
	stage.step(false)
	if len(out) != 2 || out[1].Root().Attr(phases.AttrComponentsMissing) != nil {
		t.Fatalf("with no component sending: %d traces out, want z at once, unmarked", len(out)-1)
	}
	out = out[1:]
	// The kubelet sends (another Pod's syncPod): b waits for its own.
	store.Add(kubeletSync(9, "other", t0))
	if store.Sending(phases.ServiceAPIServer, sendingWindow) {
		t.Fatal("the apiserver sends, says the store")
	}
	stage.pod(stageTrace("b", t0))
	stage.pod(stageTrace("c", t0))
	now = now.Add(time.Second)
	stage.step(false)
	if len(out) != 1 {
		t.Fatalf("%d traces out before their kubelet spans arrived, want 1", len(out))
	}
	store.Add(kubeletSync(1, "b", t0))
	now = now.Add(time.Second)
	stage.step(false)
	synced := 0
	for _, sp := range out[len(out)-1].Spans {
		if sp.Name == phases.SpanKubeletSyncPod {
			synced++
		}
	}
	if len(out) != 2 || out[1].Pod.UID != "b" || synced != 1 {
		t.Fatalf("b: %d traces out, want b joined as soon as its syncPod arrived", len(out))
	}
	now = now.Add(8 * time.Second)
	stage.step(false)
	if len(out) != 3 || out[2].Pod.UID != "c" {
		t.Fatalf("c: %d traces out at the end of the wait, want 3", len(out))
	}
	if v := out[2].Root().Attr(phases.AttrComponentsMissing); v != phases.ServiceKubelet {
		t.Errorf("c marked missing %v, want %q", v, phases.ServiceKubelet)
	}
	if v := out[1].Root().Attr(phases.AttrComponentsMissing); v != nil {
		t.Errorf("b marked missing %v", v)
	}
}

// The stage joins into a trace of its own: the one the correlator handed over, which the
// rollout tracker reads on the correlator's goroutine, keeps its spans as they were.
func TestJoinStageLeavesTheCorrelatorsTrace(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	store := otlpin.NewStore(time.Hour, 0, nil)
	var out []*phases.Trace
	stage := newJoinStage(store, time.Second, func(tr *phases.Trace) { out = append(out, tr) }, nil, nil)
	stage.now = func() time.Time { return t0 }
	store.SetNow(stage.now)
	store.Add(kubeletSync(1, "b", t0))
	handed := stageTrace("b", t0)
	before := append([]phases.Span(nil), handed.Spans...)
	stage.pod(handed)
	stage.flush()
	if len(out) != 1 || len(out[0].Spans) <= len(before) {
		t.Fatalf("%d traces out, want b with the kubelet's spans joined", len(out))
	}
	if len(handed.Spans) != len(before) || handed.Root().Attr(phases.AttrComponentsMissing) != nil {
		t.Errorf("the correlator's trace changed: %d spans, was %d", len(handed.Spans), len(before))
	}
}

// TestComponentJoinOverTheWire: readyspan watch --otlp-receive (StartComponentJoin) receives the
// real capture's spans over OTLP/HTTP and joins into each Pod's trace exactly what the daemon's
// stage joins from the same spans, and refuses an address that is not loopback.
func TestComponentJoinOverTheWire(t *testing.T) {
	reqs := readRequests(t, filepath.Join(captureDir, "components.otlp.gz"))
	deltas, err := tracer.Kinds.LoadRecording(filepath.Join(captureDir, "recording"))
	if err != nil {
		t.Fatal(err)
	}
	replay := func() []*phases.Trace {
		var out []*phases.Trace
		c := tracer.New(tracer.Config{Backfill: true}, tracer.SinkFunc(func(tr *phases.Trace) { out = append(out, tr) }), nil, nil)
		tracer.Replay(c, deltas)
		return out
	}
	joinedSpans := func(tr *phases.Trace) int {
		n := 0
		for i := range tr.Spans {
			if tr.Spans[i].StartBound.Source == phases.SourceComponentSpan {
				n++
			}
		}
		return n
	}

	// The daemon's stage, the spans added to its store directly.
	store := otlpin.NewStore(time.Hour, 0, nil)
	for _, req := range reqs {
		store.Add(otlpin.Decode(req))
	}
	want := map[string]int{}
	stage := newJoinStage(store, time.Hour, func(tr *phases.Trace) { want[tr.Pod.UID] = joinedSpans(tr) }, nil, nil)
	for _, tr := range replay() {
		stage.pod(tr)
	}
	stage.flush()

	var mu sync.Mutex
	got := map[string]int{}
	cj, err := StartComponentJoin(t.Context(), ReceiveOptions{Config: otlpin.Config{Addr: "127.0.0.1:0", Hold: time.Hour}, Wait: time.Minute},
		func(tr *phases.Trace) {
			mu.Lock()
			defer mu.Unlock()
			got[tr.Pod.UID] = joinedSpans(tr)
		}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range reqs {
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post("http://"+cj.Addr().String()+"/v1/traces", "application/x-protobuf", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /v1/traces: %s", resp.Status)
		}
	}
	for _, tr := range replay() {
		cj.Pod(tr)
	}
	if err := cj.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(want) < 7 {
		t.Fatalf("%d traces through the input, %d through the stage; want the same, at least 7", len(got), len(want))
	}
	for uid, n := range want {
		if n == 0 || got[uid] != n {
			t.Errorf("Pod %s: %d spans joined through the input, %d through the stage (want the same, and some)", uid, got[uid], n)
		}
	}

	if _, err := StartComponentJoin(t.Context(), ReceiveOptions{Config: otlpin.Config{Addr: "0.0.0.0:0"}, Wait: time.Second}, func(*phases.Trace) {}, nil); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a wildcard address: %v, want refused (only loopback)", err)
	}
}
