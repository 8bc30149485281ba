package web

import (
	"fmt"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

func TestPodSegments(t *testing.T) {
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	span := func(name string, from, to float64) phases.Span {
		return phases.Span{Name: name, Start: at(from), End: at(to)}
	}
	for _, tc := range []struct {
		name   string
		pod    phases.Span // created → available
		phases []phases.Span
		sub    []phases.Span // spans of the Pod's own trace
		want   string
	}{
		{"no trace: untraced", span("rollout.pod", 1, 5), nil, nil, "[untraced 1000-5000]"},
		{"phases in order, then minReadySeconds",
			span("rollout.pod", 0, 10),
			[]phases.Span{span("scheduling", 0, 1), span("kubelet", 1, 6), span("status", 6, 8)}, nil,
			"[scheduling 0-1000 kubelet 1000-6000 status 6000-8000 min_ready 8000-10000]"},
		{"status wins where it overlaps the kubelet",
			span("rollout.pod", 0, 6),
			[]phases.Span{span("kubelet", 0, 5), span("status", 3, 6)}, nil,
			"[kubelet 0-3000 status 3000-6000]"},
		{"pulls and readiness inside the kubelet phase",
			span("rollout.pod", 0, 10),
			[]phases.Span{span("kubelet", 0, 8), span("status", 8, 10)},
			[]phases.Span{span("container.image_pull", 1, 4), span("container.readiness", 5, 9)},
			"[kubelet 0-1000 image_pull 1000-4000 kubelet 4000-5000 readiness 5000-9000 status 9000-10000]"},
		{"phases before creation are cut off",
			span("rollout.pod", 2, 4),
			[]phases.Span{span("controllers", 0, 2), span("scheduling", 2, 3), span("kubelet", 3, 4)}, nil,
			"[scheduling 2000-3000 kubelet 3000-4000]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ph []*phases.Span
			for i := range tc.phases {
				ph = append(ph, &tc.phases[i])
			}
			var tr *phases.Trace
			if tc.sub != nil {
				tr = &phases.Trace{Spans: tc.sub}
			}
			var got []string
			for _, s := range podSegments(&tc.pod, ph, tr, t0) {
				got = append(got, fmt.Sprintf("%s %g-%g", s.Cat, s.StartMs, s.EndMs))
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("segments %v, want %s", got, tc.want)
			}
		})
	}
}
