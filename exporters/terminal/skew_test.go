package terminal

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
)

// realTrace is the trace of a Pod of a real run (otlpin/testdata/capture-chain: a Deployment's
// Pods and bare Pods on the local cluster), as readyspan replays its recording.
func realTrace(t *testing.T, root phases.Root) *phases.Trace {
	t.Helper()
	deltas, err := tracer.Kinds.LoadRecording(filepath.Join("..", "..", "otlpin", "testdata", "capture-chain", "recording"))
	if err != nil {
		t.Fatal(err)
	}
	var found *phases.Trace
	c := tracer.New(tracer.Config{Backfill: true}, tracer.SinkFunc(func(tr *phases.Trace) {
		if found == nil && tr.Pod.Root == root {
			found = tr
		}
	}), nil, nil)
	tracer.Replay(c, deltas)
	if found == nil {
		t.Fatalf("the capture has no Pod of root %s", root)
	}
	return found
}

// The kubelet's syncPod that started a Pod, with its CRI calls, as a kubelet whose clock is
// 37 s behind the apiserver's states it: its syncPod begins 37 s before the Pod's creation. The
// waterfall draws it (it panicked: a negative count of bar cells), cut at the chart's left
// edge, with its own times in its numbers, and the rest of the trace as it was.
func TestWaterfallSpanBeforeThePod(t *testing.T) {
	tr := realTrace(t, phases.RootOf("Deployment"))
	var before bytes.Buffer
	if err := Waterfall(&before, tr); err != nil {
		t.Fatal(err)
	}
	created := tr.Root().Start
	at := func(ms int) time.Time { return created.Add(time.Duration(ms) * time.Millisecond) }
	span := func(id, parent byte, name string, start, end int, kv ...string) phases.ComponentSpan {
		s := phases.ComponentSpan{Service: phases.ServiceKubelet, Name: name, Start: at(start), End: at(end)}
		s.TraceID[0], s.SpanID[0], s.Parent[0] = 7, id, parent
		for i := 0; i+1 < len(kv); i += 2 {
			s.Attrs = append(s.Attrs, phases.Attr{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	sync := phases.ComponentTrace{
		span(1, 0, "syncPod", -37000, -35500, phases.AttrPodUID, tr.Pod.UID),
		span(2, 1, "runtime.v1.RuntimeService/RunPodSandbox", -36900, -36500),
		span(3, 1, "runtime.v1.RuntimeService/CreateContainer", -36000, -35900),
		span(4, 1, "runtime.v1.RuntimeService/StartContainer", -35800, -35600),
	}
	if n := tr.Join([]phases.ComponentTrace{sync}); n == 0 {
		t.Fatal("the syncPod was not joined")
	}
	var out bytes.Buffer
	if err := Waterfall(&out, tr); err != nil {
		t.Fatal(err)
	}
	full := "|" + strings.Repeat("█", barWidth) + "|"
	edge := "|█" + strings.Repeat(" ", barWidth-1) + "|"
	found := false
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, phases.SpanKubeletSyncPod) {
			found = true
			if !strings.Contains(line, edge) || !strings.Contains(line, " -37.000s ") || !strings.Contains(line, " 1.500s ") {
				t.Errorf("the syncPod is not drawn at the left edge, 37 s early, 1.5 s long:\n%s", line)
			}
		}
		if strings.HasPrefix(line, "  "+phases.RootSpanName) && !strings.Contains(line, full) {
			t.Errorf("the root no longer spans the chart:\n%s", line)
		}
	}
	if !found {
		t.Errorf("no syncPod line:\n%s", out.String())
	}
	// The spans drawn from the API keep their lines: the join adds lines, it moves no bar.
	for _, line := range strings.Split(before.String(), "\n")[1:] {
		if line != "" && !strings.Contains(line, phases.SpanKubeletVolumes) && !strings.Contains(out.String(), strings.TrimLeft(line, " ")) {
			t.Errorf("line changed by the join:\n%s\nafter it:\n%s", line, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

// A time outside the chart lies at its nearer edge, however far: a float beyond int's range
// converts to an arbitrary int (on amd64 the most negative), which drew the year 9999 at the
// left edge.
func TestCellAtTheEdges(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	root := &phases.Span{Start: t0, End: t0.Add(10 * time.Second)}
	for _, c := range []struct {
		at   time.Time
		want int
	}{
		{time.Time{}, 0}, {time.Unix(0, 0), 0}, {time.Unix(-1<<40, 0), 0}, {t0.Add(-37 * time.Second), 0},
		{t0, 0}, {t0.Add(5 * time.Second), ganttWidth / 2}, {t0.Add(10 * time.Second), ganttWidth - 1},
		{t0.Add(time.Hour), ganttWidth - 1}, {time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), ganttWidth - 1},
		{time.Unix(0, math.MaxInt64), ganttWidth - 1},
	} {
		if got := cell(c.at, root); got != c.want {
			t.Errorf("cell(%s) = %d, want %d", c.at, got, c.want)
		}
	}
	// On a chart a nanosecond long, the year 9999 is 10^20 columns to the right.
	short := &phases.Span{Start: t0, End: t0.Add(time.Nanosecond)}
	if got := cell(time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), short); got != ganttWidth-1 {
		t.Errorf("the year 9999 on a chart 1 ns long: cell %d, want %d", got, ganttWidth-1)
	}
	for _, s := range []phases.Span{
		{Start: time.Time{}, End: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Start: time.Unix(0, math.MaxInt64), End: time.Time{}},
		{Start: t0.Add(8 * time.Second), End: t0.Add(2 * time.Second)},
	} {
		if b := bar(&s, root); utf8.RuneCountInString(b) != barWidth || !strings.Contains(b, "█") {
			t.Errorf("bar of %s–%s: %q", s.Start, s.End, b)
		}
	}
}

// A float that is not finite (a component's span may carry one) is written by its name: JSON
// has no number for it, and the line failed to encode, ending watch -o json.
func TestJSONLinesNonFiniteAttribute(t *testing.T) {
	tr := realTrace(t, phases.RootOf("Deployment"))
	sp := &tr.Spans[len(tr.Spans)-1]
	sp.Attrs = append(sp.Attrs[:len(sp.Attrs):len(sp.Attrs)], phases.Attr{Key: "nan", Value: math.NaN()})
	var out bytes.Buffer
	if err := JSONLines(&out, tr); err != nil || !strings.Contains(out.String(), `"nan":"NaN"`) {
		t.Errorf("JSON lines: %v\n%s", err, out.String())
	}
}
