package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/exporters/otlp"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/web"
)

// joinBase is a real Pod's trace and the rollout that created the Pod, from the run the
// components' spans of otlpin/testdata were captured in (a Deployment's Pods on the local
// cluster), as readyspan replays its recording. It is read once: the tests join copies.
type joinBase struct {
	pod     *phases.Trace
	rollout *rollout.Rollout
	newPod  int // the Pod's index in rollout.NewPods
}

var (
	joinBaseOnce sync.Once
	joinBaseVal  *joinBase
	joinBaseErr  string
)

func loadJoinBase(tb testing.TB) *joinBase {
	tb.Helper()
	joinBaseOnce.Do(func() {
		deltas, err := tracer.Kinds.LoadRecording(filepath.Join("..", "..", "otlpin", "testdata", "capture-chain", "recording"))
		if err != nil {
			joinBaseErr = err.Error()
			return
		}
		var pods []*phases.Trace
		var rollouts []*rollout.Trace
		c := tracer.New(tracer.Config{Backfill: true, Rollouts: tracker.SinkFunc(func(r *rollout.Trace) { rollouts = append(rollouts, r) })},
			tracer.SinkFunc(func(tr *phases.Trace) { pods = append(pods, tr) }), nil, nil)
		tracer.Replay(c, deltas)
		for _, r := range rollouts {
			for i, np := range r.Rollout.NewPods {
				for _, p := range pods {
					if p.Pod.UID == np.UID && np.Trace != nil && joinBaseVal == nil {
						joinBaseVal = &joinBase{pod: p, rollout: r.Rollout, newPod: i}
					}
				}
			}
		}
		if joinBaseVal == nil {
			joinBaseErr = "the capture has no Pod traced in a rollout"
		}
	})
	if joinBaseErr != "" {
		tb.Fatal(joinBaseErr)
	}
	return joinBaseVal
}

// join is a copy of the base Pod's trace with traces joined into it, and the rollout rebuilt
// with that trace as its Pod's (as the daemon's rollout holds the trace the join stage joins).
func (b *joinBase) join(traces []phases.ComponentTrace) (*phases.Trace, *rollout.Trace) {
	tr := *b.pod
	tr.Spans = slices.Clone(b.pod.Spans)
	tr.Join(traces)
	r := *b.rollout
	r.NewPods = slices.Clone(r.NewPods)
	r.NewPods[b.newPod].Trace = &tr
	return &tr, rollout.Build(&r)
}

// views is what every view made of one Pod's trace and its rollout: the waterfall and the JSON
// lines of watch, replay and explain (through the same writer), the Gantt, the UI's JSON, the
// HTML report and the OTLP request.
type views struct {
	waterfall, jsonLines, gantt, ganttJSON []byte
	podJSON, rolloutJSON, report           []byte
	otlp                                   []*tracepb.Span
}

func renderViews(t *testing.T, tr *phases.Trace, rt *rollout.Trace) views {
	t.Helper()
	var v views
	for _, o := range []struct {
		format string
		out    *[]byte
		rollup bool
	}{{"waterfall", &v.waterfall, false}, {"json", &v.jsonLines, false}, {"waterfall", &v.gantt, true}, {"json", &v.ganttJSON, true}} {
		var buf bytes.Buffer
		of := &outputFlag{format: o.format}
		var err error
		if o.rollup {
			err = of.writeRollout(&buf, rt)
		} else {
			err = of.write(&buf, tr)
		}
		if err != nil {
			t.Fatalf("%s: %v", o.format, err)
		}
		*o.out = buf.Bytes()
	}
	ring := web.NewRing(web.RingConfig{})
	ring.AddPod(tr)
	ring.AddRollout(rt)
	srv := web.NewServer(ring, web.ServerConfig{})
	get := func(path string) []byte {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Host = "localhost"
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body.Bytes())
		}
		return rec.Body.Bytes()
	}
	v.podJSON = get("/api/v1/pods/" + tr.Pod.UID)
	v.rolloutJSON = get("/api/v1/rollouts/" + rt.Root().SpanID.String())
	var page bytes.Buffer
	if err := writeReport(&page, "report", "", []*phases.Trace{tr}, []*rollout.Trace{rt}, nil); err != nil {
		t.Fatalf("report: %v", err)
	}
	v.report = page.Bytes()
	sink := &otlpSink{}
	e := otlp.NewWithClient(sink, otlp.Config{}, noStats{}, nil)
	e.Start(context.Background())
	e.Export(tr)
	e.ExportRollout(rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatalf("OTLP: %v", err)
	}
	if _, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: sink.got}); err != nil {
		t.Fatalf("the OTLP request does not marshal: %v", err)
	}
	for _, rs := range sink.got {
		for _, ss := range rs.ScopeSpans {
			v.otlp = append(v.otlp, ss.Spans...)
		}
	}
	if len(v.otlp) != len(tr.Spans)+len(rt.Spans) {
		t.Fatalf("OTLP: %d spans sent of %d", len(v.otlp), len(tr.Spans)+len(rt.Spans))
	}
	return v
}

// otlpSink is an OTLP client that keeps what it is sent.
type otlpSink struct {
	mu  sync.Mutex
	got []*tracepb.ResourceSpans
}

func (s *otlpSink) Start(context.Context) error { return nil }
func (s *otlpSink) Stop(context.Context) error  { return nil }
func (s *otlpSink) UploadTraces(_ context.Context, rs []*tracepb.ResourceSpans) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs { // the exporter reuses the request's messages once this returns
		s.got = append(s.got, proto.Clone(r).(*tracepb.ResourceSpans))
	}
	return nil
}

type noStats struct{}

func (noStats) TraceExported()      {}
func (noStats) ExportError()        {}
func (noStats) TraceDropped(string) {}

// waterfallBar is a span's bar in the waterfall (exporters/terminal's barWidth cells): the first
// run of a line's cells between bars. A name is cut to 34 characters, too few to fake one.
var waterfallBar = regexp.MustCompile(`\|([ █]*)\|`)

// checkViews holds the invariants every view keeps, whatever the joined spans' times and
// strings: terminal output safe for a terminal, one bar of the chart's width per span, JSON that
// decodes (so no NaN or infinity) and is valid UTF-8 with no raw control character, each UI row
// beneath its parent, the OTLP request's times within what its field holds and each span's
// attribute keys once.
func checkViews(t *testing.T, tr *phases.Trace, v views) {
	t.Helper()
	for _, o := range []struct {
		what string
		out  []byte
	}{{"waterfall", v.waterfall}, {"JSON lines", v.jsonLines}, {"Gantt", v.gantt}, {"rollout JSON lines", v.ganttJSON}} {
		assertTerminalSafe(t, o.what, o.out)
	}
	bars := 0
	for _, line := range strings.Split(string(v.waterfall), "\n") {
		m := waterfallBar.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		bars++
		if n := utf8.RuneCountInString(m[1]); n != 40 || !strings.Contains(m[1], "█") {
			t.Fatalf("a bar of %d cells, none filled: %q", n, line)
		}
	}
	if bars != len(tr.Spans) {
		t.Fatalf("%d bars for %d spans:\n%s", bars, len(tr.Spans), v.waterfall)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(v.jsonLines), []byte("\n")) {
		if !json.Valid(line) {
			t.Fatalf("a JSON line that does not decode: %q", line)
		}
	}
	for _, o := range []struct {
		what string
		out  []byte
	}{{"the UI's Pod", v.podJSON}, {"the UI's rollout", v.rolloutJSON}} {
		if !utf8.Valid(o.out) || bytes.ContainsFunc(o.out, func(r rune) bool { return r < 0x20 }) {
			t.Fatalf("%s: not UTF-8, or a raw control character: %q", o.what, o.out)
		}
	}
	if !utf8.Valid(v.report) || bytes.ContainsFunc(v.report, func(r rune) bool { return r < 0x20 && r != '\n' }) {
		t.Fatal("the report: not UTF-8, or a raw control character")
	}
	var pod web.PodView
	if err := json.Unmarshal(v.podJSON, &pod); err != nil {
		t.Fatalf("the UI's Pod: %v", err)
	}
	if len(pod.Spans) != len(tr.Spans) {
		t.Fatalf("the UI has %d rows for %d spans", len(pod.Spans), len(tr.Spans))
	}
	for k, s := range pod.Spans {
		for _, x := range []float64{s.StartMs, s.DurMs} {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("row %s: %v", s.Name, x)
			}
		}
		if k > 0 && (s.Depth < 1 || s.Depth > pod.Spans[k-1].Depth+1) {
			t.Fatalf("row %d (%s) at depth %d after one at depth %d: not beneath its parent", k, s.Name, s.Depth, pod.Spans[k-1].Depth)
		}
		for j := k - 1; k > 0 && s.Depth > 1 && j >= 0; j-- {
			if p := pod.Spans[j]; p.Depth == s.Depth-1 {
				if p.Phase != s.Phase {
					t.Fatalf("row %d (%s) in phase %q beneath %s of phase %q", k, s.Name, s.Phase, p.Name, p.Phase)
				}
				break
			}
		}
	}
	for _, s := range v.otlp {
		if s.StartTimeUnixNano > math.MaxInt64 || s.EndTimeUnixNano > math.MaxInt64 {
			t.Fatalf("span %s sent at %d–%d, beyond a signed 64-bit nanosecond", s.Name, s.StartTimeUnixNano, s.EndTimeUnixNano)
		}
		keys := map[string]bool{}
		for _, kv := range s.Attributes {
			if keys[kv.Key] && strings.HasPrefix(kv.Key, "readyspan.") {
				t.Fatalf("span %s sends %s twice", s.Name, kv.Key)
			}
			keys[kv.Key] = true
		}
	}
}

// forged is what a sender put under readyspan's own attribute names, to see that no view
// shows it.
const forged = "forged-by-the-sender"

// fuzzTime is one fuzzed time: an offset in ns from the Pod's creation, or (by mode's bits) Unix
// seconds, Unix nanoseconds, or the zero time.
func fuzzTime(t0 time.Time, v int64, mode uint8) time.Time {
	switch mode & 3 {
	case 1:
		return time.Unix(v, 0)
	case 2:
		return time.Unix(0, v)
	case 3:
		return time.Time{}
	}
	return t0.Add(time.Duration(v))
}

// fuzzTraces is a kubelet trace (a syncPod that ran RunPodSandbox, with containerd beneath),
// the create request and a Binding from the apiserver, at the fuzzed times, each carrying the
// fuzzed attribute and readyspan's own attributes forged, plus one more span of the fuzzed
// service and name under the fuzzed parent.
func fuzzTraces(uid string, t0 time.Time, service uint8, name, key, value string, start, end int64, mode, parent uint8, ownPod bool) []phases.ComponentTrace {
	s0, e0 := fuzzTime(t0, start, mode), fuzzTime(t0, end, mode>>2)
	if !ownPod {
		uid = value
	}
	attrs := func(kv ...string) []phases.Attr {
		kv = append(kv, key, value, phases.AttrSourceStart, forged, phases.AttrComponentSpanName, forged, phases.AttrPrecisionStart, forged)
		var out []phases.Attr
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, phases.Attr{Key: kv[i], Value: kv[i+1]})
		}
		return append(out, phases.Attr{Key: key, Value: float64(start) / float64(end)}) // NaN and infinities too
	}
	span := func(svc string, trace, id, parent byte, name string, kv ...string) phases.ComponentSpan {
		c := phases.ComponentSpan{Service: svc, Name: name, Start: s0, End: e0, Attrs: attrs(kv...), Error: mode&16 != 0, StatusMessage: value}
		c.TraceID[0], c.SpanID[0], c.Parent[0] = trace, id, parent
		return c
	}
	sync := phases.ComponentTrace{
		span(phases.ServiceKubelet, 1, 1, 0, "syncPod", phases.AttrPodUID, uid),
		span(phases.ServiceKubelet, 1, 2, 1, "runtime.v1.RuntimeService/RunPodSandbox"),
		span(phases.ServiceContainerd, 1, 3, 2, "cri.sandbox.run"),
	}
	create := phases.ComponentTrace{
		span(phases.ServiceAPIServer, 2, 1, 0, "POST /api/v1/namespaces/{:namespace}/pods"),
		span(phases.ServiceAPIServer, 2, 2, 1, "Create", "resource", "pods", "verb", "POST", "subresource", ""),
	}
	binding := phases.ComponentTrace{
		span(phases.ServiceAPIServer, 3, 1, 0, "POST /api/v1/namespaces/{:namespace}/pods/{:name}/binding"),
		span(phases.ServiceAPIServer, 3, 2, 1, "Create", "resource", "pods", "verb", "POST", "subresource", "binding"),
	}
	svc := []string{phases.ServiceAPIServer, phases.ServiceKubelet, phases.ServiceContainerd}[int(service)%3]
	extra := span(svc, 1, 4, []byte{0, 1, 2, 4}[parent%4], name) // parent 4: itself
	if svc == phases.ServiceAPIServer {
		extra.TraceID[0], extra.Parent[0] = 2, []byte{0, 1, 2, 4}[parent%4]
		create = append(create, extra)
	} else {
		sync = append(sync, extra)
	}
	return []phases.ComponentTrace{create, binding, sync}
}

// FuzzJoinViews joins arbitrary component spans into a real Pod's trace (their times before
// the Pod, after it, zero, years away, ending before they start; their names and attributes any
// strings, readyspan's own attribute names forged among them) and draws every view of it: none
// may panic, break its invariants (checkViews) or show what the sender forged.
func FuzzJoinViews(f *testing.F) {
	const s = int64(time.Second)
	// The report: a kubelet whose clock is 37 s behind states a syncPod before the Pod's creation.
	f.Add(uint8(1), "runtime.v1.RuntimeService/StartContainer", "k8s.pod.uid", "x", -37*s, -35*s, uint8(0), uint8(1), true)
	f.Add(uint8(0), "Create etcd3", "key", "/pods/ns/p", int64(0), int64(0), uint8(3|3<<2), uint8(2), true)                                 // zero times
	f.Add(uint8(2), "cni.setup_pod_network", "readyspan.link", "\x1b]0;T\a", int64(0), int64(math.MaxInt64), uint8(2|2<<2), uint8(3), true) // 1970 to 2262
	f.Add(uint8(1), "syncPod", "k", "\u202eevil\xff", int64(-62135596800), int64(253402300799), uint8(1|1<<2|16), uint8(0), false)          // years 1 and 9999
	f.Add(uint8(1), "runtime.v1.ImageService/PullImage", "", "", 5*s, 2*s, uint8(16), uint8(1), true)                                       // end before start
	f.Add(uint8(0), "authorization", "verb", "POST", -s<<30, int64(-1), uint8(2<<2), uint8(1), true)                                        // negative Unix times
	f.Fuzz(func(t *testing.T, service uint8, name, key, value string, start, end int64, mode, parent uint8, ownPod bool) {
		b := loadJoinBase(t)
		tr, rt := b.join(fuzzTraces(b.pod.Pod.UID, b.pod.Root().Start, service, name, key, value, start, end, mode, parent, ownPod))
		v := renderViews(t, tr, rt)
		checkViews(t, tr, v)
		if strings.Contains(name+key+value, forged) {
			return
		}
		for _, o := range [][]byte{v.waterfall, v.jsonLines, v.podJSON, v.report} {
			if bytes.Contains(o, []byte(forged)) {
				t.Fatalf("a view shows what the sender forged under readyspan's names:\n%s", o)
			}
		}
		for _, s := range v.otlp {
			for _, kv := range s.Attributes {
				if strings.Contains(kv.GetValue().GetStringValue(), forged) {
					t.Fatalf("OTLP: span %s sends %s=%s", s.Name, kv.Key, kv.GetValue().GetStringValue())
				}
			}
		}
	})
}

// The report that opened issue 32: a kubelet whose clock is 37 s behind the apiserver's states
// the syncPod that started a real Pod 37 s before the Pod's creation. Every view draws it; in
// each, the copy says readyspan's own source of its times and the kubelet's name for it, not
// what the kubelet forged under readyspan's attribute names (readyspan.time.source.start=audit,
// readyspan.component.span_name=forged).
func TestForgedAttributesAndSkewInEveryView(t *testing.T) {
	b := loadJoinBase(t)
	t0 := b.pod.Root().Start
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	span := func(id, parent byte, name string, start, end int, kv ...any) phases.ComponentSpan {
		c := phases.ComponentSpan{Service: phases.ServiceKubelet, Name: name, Start: at(start), End: at(end),
			Attrs: []phases.Attr{{Key: phases.AttrSourceStart, Value: "audit"}, {Key: phases.AttrComponentSpanName, Value: "forged"}}}
		c.TraceID[0], c.SpanID[0], c.Parent[0] = 9, id, parent
		for i := 0; i+1 < len(kv); i += 2 {
			c.Attrs = append(c.Attrs, phases.Attr{Key: kv[i].(string), Value: kv[i+1]})
		}
		return c
	}
	tr, rt := b.join([]phases.ComponentTrace{{
		span(1, 0, "syncPod", -37000, -35500, phases.AttrPodUID, b.pod.Pod.UID),
		span(2, 1, "runtime.v1.RuntimeService/RunPodSandbox", -36900, -36500),
	}})
	v := renderViews(t, tr, rt)
	checkViews(t, tr, v)

	line := ""
	for _, l := range strings.Split(string(v.waterfall), "\n") {
		if strings.Contains(l, phases.SpanKubeletSyncPod) {
			line = l
		}
	}
	if !strings.Contains(line, "-37.000s") || !strings.Contains(line, "component-span→component-span") {
		t.Errorf("waterfall: the syncPod's line %q; want it 37 s early, its times the component span's", line)
	}
	var pod web.PodView
	if err := json.Unmarshal(v.podJSON, &pod); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range pod.Spans {
		if s.Name != phases.SpanKubeletSyncPod && s.Name != phases.SpanCRIRunPodSandbox {
			continue
		}
		n++
		if s.SourceStart != "component-span" || s.Attrs[phases.AttrComponentSpanName] == "forged" || s.Attrs[phases.AttrComponentSpanName] == nil {
			t.Errorf("UI: %s says its start came from %q, its component name %v", s.Name, s.SourceStart, s.Attrs[phases.AttrComponentSpanName])
		}
	}
	if n != 2 {
		t.Errorf("UI: %d of the kubelet's spans, want 2", n)
	}
	n = 0
	for _, s := range v.otlp {
		if s.Name != phases.SpanKubeletSyncPod && s.Name != phases.SpanCRIRunPodSandbox {
			continue
		}
		n++
		got := map[string][]string{}
		for _, kv := range s.Attributes {
			got[kv.Key] = append(got[kv.Key], kv.GetValue().GetStringValue())
		}
		if src, name := got[phases.AttrSourceStart], got[phases.AttrComponentSpanName]; len(src) != 1 || src[0] != "component-span" || len(name) != 1 || name[0] == "forged" {
			t.Errorf("OTLP: %s sends %s=%q, %s=%q", s.Name, phases.AttrSourceStart, src, phases.AttrComponentSpanName, name)
		}
		if want := uint64(at(-37000).UnixNano()); s.Name == phases.SpanKubeletSyncPod && s.StartTimeUnixNano != want {
			t.Errorf("OTLP: the syncPod starts at %d, want the kubelet's %d", s.StartTimeUnixNano, want)
		}
	}
	if n != 2 {
		t.Errorf("OTLP: %d of the kubelet's spans, want 2", n)
	}
}
