package terminal

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// joinedTrace is a bare Pod's trace with the apiserver's requests joined into it: its create
// with a mutating webhook call and the etcd write, and a status write that began while the
// kubelet was still starting it, so in start order it lies among the kubelet's spans.
func joinedTrace(t *testing.T) *phases.Trace {
	t.Helper()
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	p := &phases.Pod{UID: "9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f", Name: "web-1", Namespace: "default", Root: phases.RootBarePod}
	p.Created.Add(at(3), phases.SourceWatch)
	p.Scheduled.Add(at(43), phases.SourceEventTime)
	c := phases.Container{Name: "web", Image: "busybox", Cache: "cold"}
	c.PullStarted.Add(at(800), phases.SourceEventName)
	c.PullFinished.Add(at(5800), phases.SourceEventName)
	c.Started.Add(at(6000), phases.SourceEventName)
	p.Containers = []phases.Container{c}
	p.ContainersReady.Add(at(6500), phases.SourceWatch)
	p.Ready.Add(at(6500), phases.SourceWatch)
	tr := phases.Build(p, phases.Options{})
	n := byte(0)
	span := func(trace, parent byte, name string, start, end int, kv ...string) phases.ComponentSpan {
		n++
		s := phases.ComponentSpan{Service: phases.ServiceAPIServer, Name: name, Start: at(start), End: at(end)}
		s.TraceID[0], s.SpanID[0], s.Parent[0] = trace, n, parent
		for i := 0; i+1 < len(kv); i += 2 {
			s.Attrs = append(s.Attrs, phases.Attr{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	create := phases.ComponentTrace{
		span(1, 0, "POST /api/v1/namespaces/{:namespace}/pods", 0, 100),
		span(1, 1, "Create", 1, 99, "resource", "pods", "verb", "POST", "subresource", ""),
		span(1, 2, "Call mutating webhook", 10, 62, "webhook", "inject\x1b[31m.example.com"),
		span(1, 2, "Create etcd3", 80, 84, "key", "/pods/default/web-1"),
	}
	status := phases.ComponentTrace{
		span(2, 0, "PATCH /api/v1/namespaces/{:namespace}/pods/{:name}/status", 900, 910),
		span(2, 5, "Patch", 901, 909, "resource", "pods", "verb", "PATCH", "subresource", "status"),
		span(2, 6, "GuaranteedUpdate etcd3", 902, 908, "key", "/pods/default/web-1"),
	}
	if tr.Join([]phases.ComponentTrace{create, status}) == 0 {
		t.Fatal("nothing joined")
	}
	return tr
}

// Each span's line stands beneath its parent's: the nearest line above it one level less deep
// is its parent, in the trace's start order for spans drawn from the API and for the joined
// ones alike.
func TestWaterfallTreeOrder(t *testing.T) {
	tr := joinedTrace(t)
	rows := phases.TreeOrder(tr.Spans)
	if len(rows) != len(tr.Spans) {
		t.Fatalf("%d rows for %d spans", len(rows), len(tr.Spans))
	}
	for k, r := range rows {
		if k == 0 {
			continue
		}
		s := &tr.Spans[r.Index]
		var above *phases.Span
		for j := k - 1; j >= 0; j-- {
			if rows[j].Depth == r.Depth-1 {
				above = &tr.Spans[rows[j].Index]
				break
			}
		}
		if above == nil || above.SpanID != s.ParentSpanID {
			name := "nothing"
			if above != nil {
				name = above.Name
			}
			t.Errorf("%s (depth %d) stands beneath %s, not its parent", s.Name, r.Depth, name)
		}
	}
	var buf bytes.Buffer
	if err := Waterfall(&buf, tr); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	hook := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, "apiserver.admission.mutat") { // the name is cut to its column
			hook = line
		}
	}
	// The webhook's name is a note, escaped: it comes over the network.
	if !strings.Contains(hook, `inject\x1b[31m.example.com`) || strings.Contains(out, "\x1b") {
		t.Errorf("the webhook line does not name the webhook, escaped: %q", hook)
	}
	if strings.Contains(out, "component-span→component-span "+phases.LinkComponentSpan) {
		t.Errorf("a component span's link to its original is written as a note:\n%s", out)
	}
	t.Logf("\n%s", out)
}
