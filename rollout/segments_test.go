package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

func TestSegmentsOf(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	span := func(name string, from, to float64) phases.Span {
		return phases.Span{Name: name, Start: at(from), End: at(to)}
	}
	for _, tc := range []struct {
		name           string
		from, to, rdy  float64 // created, available, Ready (0: not Ready)
		spans          []phases.Span
		failingSince   float64 // the first container failure (0: none)
		untraced, want string
	}{
		{name: "no trace: untraced", from: 1, to: 5, want: "[untraced 1-5]", untraced: "no trace"},
		{name: "no trace, Ready: minReadySeconds after Ready", from: 1, to: 5, rdy: 4, want: "[untraced 1-4 min_ready 4-5]", untraced: "no trace"},
		{name: "phases in order, then minReadySeconds", from: 0, to: 10, rdy: 8,
			spans: []phases.Span{span("pod.startup", 0, 8), span("scheduling", 0, 1), span("kubelet", 1, 6), span("status", 6, 8)},
			want:  "[scheduling 0-1 kubelet_other 1-6 status 6-8 min_ready 8-10]"},
		{name: "status wins where it overlaps the kubelet", from: 0, to: 6, rdy: 6,
			spans: []phases.Span{span("pod.startup", 0, 6), span("kubelet", 0, 5), span("status", 3, 6)},
			want:  "[kubelet_other 0-3 status 3-6]"},
		{name: "pulls and readiness inside the kubelet phase", from: 0, to: 10, rdy: 10,
			spans: []phases.Span{span("pod.startup", 0, 10), span("kubelet", 0, 8), span("status", 8, 10),
				span("container.image_pull", 1, 4), span("container.readiness", 5, 9)},
			want: "[kubelet_other 0-1 image_pull 1-4 kubelet_other 4-5 readiness 5-9 status 9-10]"},
		{name: "phases before creation are cut off", from: 2, to: 4, rdy: 4,
			spans: []phases.Span{span("pod.startup", 0, 4), span("controllers", 0, 2), span("scheduling", 2, 3), span("kubelet", 3, 4)},
			want:  "[scheduling 2-3 kubelet_other 3-4]"},
		{name: "phases past the row's end are cut off", from: 0, to: 3, rdy: 3,
			spans: []phases.Span{span("pod.startup", 0, 6), span("scheduling", 0, 1), span("kubelet", 1, 5), span("status", 5, 6)},
			want:  "[scheduling 0-1 kubelet_other 1-3]"},
		{name: "what no phase covers is untraced, where it is", from: 0, to: 5, rdy: 5,
			spans: []phases.Span{span("pod.startup", 0, 5), span("scheduling", 0, 1), span("kubelet", 2, 5)},
			want:  "[scheduling 0-1 untraced 1-2 kubelet_other 2-5]"},
		{name: "a crash loop is failing, not waiting for readiness", from: 0, to: 20,
			spans: []phases.Span{span("pod.startup", 0, 20), span("kubelet", 0, 20), span("status", 3, 20),
				span("container.readiness", 3, 20)},
			failingSince: 5,
			want:         "[kubelet_other 0-3 readiness 3-5 failing 5-20]"},
		{name: "a failing pull is failing from its first error", from: 0, to: 30,
			spans:        []phases.Span{span("pod.startup", 0, 30), span("kubelet", 0, 30), span("container.image_pull", 1, 30)},
			failingSince: 2,
			want:         "[kubelet_other 0-1 image_pull 1-2 failing 2-30]"},
		{name: "a volume that does not mount is failing from its first FailedMount", from: 0, to: 30,
			spans: []phases.Span{span("pod.startup", 0, 30), span("scheduling", 0, 1), span("kubelet", 1, 30),
				span("kubelet.sandbox", 1, 30), span("kubelet.volumes", 1, 30)},
			failingSince: 2,
			want:         "[scheduling 0-1 kubelet_other 1-2 failing 2-30]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &NewPod{UID: "u"}
			if tc.untraced == "" {
				p.Trace = &phases.Trace{Spans: tc.spans}
				if tc.failingSince > 0 {
					p.Trace.Summary.FailureReason, p.Trace.Summary.FailingSince = "CrashLoopBackOff", at(tc.failingSince)
				}
			}
			it := &item{uid: "u", start: at(tc.from), end: at(tc.to), endKnown: true, newPod: p}
			if tc.rdy > 0 {
				it.readyAt = at(tc.rdy)
			}
			segs := segmentsOf(it)
			var got []string
			for i, s := range segs {
				got = append(got, fmt.Sprintf("%s %g-%g", s.Category.Name, s.From.Sub(t0).Seconds(), s.To.Sub(t0).Seconds()))
				if i > 0 && s.From.Before(segs[i-1].To) {
					t.Errorf("segment %d overlaps the one before", i)
				}
			}
			if fmt.Sprint(got) != tc.want {
				t.Errorf("segments %v, want %s", got, tc.want)
			}
		})
	}
}
