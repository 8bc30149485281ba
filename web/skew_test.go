package web

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// A kubelet whose clock is 37 s behind the apiserver's states a syncPod that began before the
// Pod was created. Joined into a real Pod's trace (otlpin/testdata/capture-chain), it reaches
// the page with its own times, beneath the kubelet phase it belongs to (in start order it came
// first, and was sent as a phase of its own at depth 1), and every other row as it was.
func TestWaterfallSpanBeforeThePod(t *testing.T) {
	pods, _ := replay(t, filepath.Join("..", "otlpin", "testdata", "capture-chain", "recording"))
	var tr *phases.Trace
	for _, p := range pods {
		if p.Pod.Root == phases.RootOf("Deployment") {
			tr = p
			break
		}
	}
	if tr == nil {
		t.Fatal("the capture has no Deployment's Pod")
	}
	before := podView(tr)
	created := tr.Root().Start
	at := func(ms int) time.Time { return created.Add(time.Duration(ms) * time.Millisecond) }
	span := func(id, parent byte, name string, start, end int) phases.ComponentSpan {
		s := phases.ComponentSpan{Service: phases.ServiceKubelet, Name: name, Start: at(start), End: at(end)}
		s.TraceID[0], s.SpanID[0], s.Parent[0] = 7, id, parent
		return s
	}
	sync := span(1, 0, "syncPod", -37000, -35500)
	sync.Attrs = []phases.Attr{{Key: phases.AttrPodUID, Value: tr.Pod.UID}}
	if tr.Join([]phases.ComponentTrace{{sync, span(2, 1, "runtime.v1.RuntimeService/RunPodSandbox", -36900, -36500)}}) == 0 {
		t.Fatal("the syncPod was not joined")
	}
	v := podView(tr)
	if v.DurationMs != before.DurationMs || v.Start != before.Start {
		t.Errorf("the Pod's trace became %s + %.3f ms, was %s + %.3f ms", v.Start, v.DurationMs, before.Start, before.DurationMs)
	}
	var kubeletDepth = -1
	found := false
	for k, s := range v.Spans {
		if s.Name == phases.PhaseKubelet {
			kubeletDepth = s.Depth
		}
		if k > 0 && (s.Depth < 1 || s.Depth > v.Spans[k-1].Depth+1) {
			t.Errorf("row %d (%s) at depth %d after one at depth %d", k, s.Name, s.Depth, v.Spans[k-1].Depth)
		}
		if s.Name != phases.SpanKubeletSyncPod {
			continue
		}
		found = true
		if s.StartMs != -37000 || s.DurMs != 1500 || s.Phase != phases.PhaseKubelet || s.Cat != phases.PhaseKubelet || s.Depth != kubeletDepth+1 {
			t.Errorf("the syncPod is sent at %+.3f ms for %.3f ms, depth %d (kubelet's %d), phase %q, category %q; want -37000 for 1500, beneath the kubelet phase",
				s.StartMs, s.DurMs, s.Depth, kubeletDepth, s.Phase, s.Cat)
		}
	}
	if !found {
		t.Fatal("no syncPod row")
	}
	rows := map[string]SpanView{}
	for _, s := range v.Spans {
		rows[s.Name+"@"+s.Label+"@"+s.Service] = s
	}
	for _, s := range before.Spans {
		got, ok := rows[s.Name+"@"+s.Label+"@"+s.Service]
		if s.Name == phases.SpanKubeletVolumes {
			continue // the kubelet's order states it now
		}
		if !ok || got.StartMs != s.StartMs || got.DurMs != s.DurMs || got.Phase != s.Phase || got.Cat != s.Cat {
			t.Errorf("%s: %+v after the join, %+v before", s.Name, got, s)
		}
	}
}

// A component may send a float that is not finite (OTLP's double holds one): JSON has no number
// for it, and one such attribute made the whole Pod's view fail to encode, and the ring dropped
// the trace. It is sent as its name.
func TestNonFiniteAttribute(t *testing.T) {
	pods, _ := replay(t, filepath.Join("..", "otlpin", "testdata", "capture-chain", "recording"))
	tr := pods[0]
	sp := &tr.Spans[len(tr.Spans)-1]
	sp.Attrs = append(slices.Clip(sp.Attrs), phases.Attr{Key: "nan", Value: math.NaN()}, phases.Attr{Key: "inf", Value: math.Inf(-1)})
	sp.AddEvent(phases.Event{Name: "e", Time: sp.Start, Attrs: []phases.Attr{{Key: "inf", Value: math.Inf(1)}}})
	r := NewRing(RingConfig{})
	r.AddPod(tr)
	body := r.Pod(tr.Pod.UID)
	if body == nil {
		t.Fatal("the Pod's view did not encode")
	}
	if !strings.Contains(string(body), `"nan":"NaN"`) || !strings.Contains(string(body), `"inf":"-Inf"`) || !strings.Contains(string(body), `"inf":"+Inf"`) {
		t.Errorf("the values are not sent by name: %s", body)
	}
}
