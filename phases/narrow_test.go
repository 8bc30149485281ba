package phases

import (
	"testing"
	"time"
)

func TestNarrow(t *testing.T) {
	at := func(n int, src Source) point {
		p := point{t: InstantOf(ms(n)), src: src, observed: true}
		if src.Precision() == time.Second {
			p.uncertainty = time.Second
		}
		return p
	}
	ps := func(p ...point) []point { return p }
	tests := []struct {
		name      string
		p         point
		preceding []point
		following []point
		place     placement
		want      point
	}{
		{"precise stamps are left alone", at(430, SourceEventName), ps(at(500, SourceEventTime)), nil, placeAtNext, at(430, SourceEventName)},
		{"receive times are left alone", at(430, SourceWatch), ps(at(500, SourceEventTime)), nil, placeEarliest, at(430, SourceWatch)},
		{"nothing around it: the stamp, a second wide", at(1000, SourceStatus), nil, nil, placeAtNext,
			point{t: InstantOf(ms(1000)), src: SourceStatus, observed: true, uncertainty: time.Second}},
		// The sandbox condition says [1.000, 2.000); the kubelet's Pulled at 1.783 bounds it from
		// above, and it follows the sandbox at once.
		{"at the next event", at(1000, SourceStatus), ps(at(686, SourceEventTime)), ps(at(1783, SourceEventName)), placeAtNext,
			point{t: InstantOf(ms(1783)), src: SourceStatus, observed: true, uncertainty: 783 * time.Millisecond}},
		// The condition's second began before the bind: the window starts at the bind.
		{"second began before the bind", at(0, SourceStatus), ps(at(400, SourceEventTime)), ps(at(587, SourceEventName)), placeAtNext,
			point{t: InstantOf(ms(587)), src: SourceStatus, observed: true, uncertainty: 187 * time.Millisecond}},
		{"earliest: the stamp itself", at(1000, SourceStatus), ps(at(686, SourceEventTime)), ps(at(1783, SourceEventName)), placeEarliest,
			point{t: InstantOf(ms(1000)), src: SourceStatus, observed: true, uncertainty: 783 * time.Millisecond}},
		{"earliest: a later precise boundary before it", at(0, SourceMetadata), ps(at(407, SourceEventName)), nil, placeEarliest,
			point{t: InstantOf(ms(407)), src: SourceMetadata, observed: true, uncertainty: 593 * time.Millisecond}},
		// The next event beyond the second says nothing more: the window is the second.
		{"next event after the second", at(1000, SourceStatus), ps(at(686, SourceEventTime)), ps(at(2500, SourceEventName)), placeAtNext,
			point{t: InstantOf(ms(1000)), src: SourceStatus, observed: true, uncertainty: time.Second}},
		// Bounds that are not precise do not narrow: a receive time, another whole second.
		{"imprecise bounds ignored", at(1000, SourceStatus), ps(at(1500, SourceWatch), at(1000, SourceMetadata)), ps(at(1200, SourceWatch)), placeAtNext,
			point{t: InstantOf(ms(1000)), src: SourceStatus, observed: true, uncertainty: time.Second}},
		// The stamps disagree (the next event before the second began): kept as it is.
		{"empty window", at(2000, SourceStatus), ps(at(686, SourceEventTime)), ps(at(1783, SourceEventName)), placeAtNext,
			point{t: InstantOf(ms(2000)), src: SourceStatus, observed: true, uncertainty: time.Second}},
		{"unobserved", point{}, ps(at(686, SourceEventTime)), nil, placeAtNext, point{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := narrow(tt.p, tt.preceding, tt.following, tt.place); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestSandboxFromWholeSeconds is a warm start seen without receive times: the bind at 0.400 s
// (eventTime), PodReadyToStartContainers stamped at the whole second 0, the kubelet's Pulled at
// 0.587 s. The sandbox ended in [0.400, 0.587]: it must not be drawn as 0 ms with its time given
// to the container, nor leave the container a hole before its first event.
func TestSandboxFromWholeSeconds(t *testing.T) {
	p := &Pod{UID: "9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f", Name: "web", Namespace: "default", Root: RootBarePod}
	p.Created.Add(ms(-1000), SourceMetadata)
	p.Scheduled.Add(ms(400), SourceEventTime)
	p.SandboxReady.Add(ms(0), SourceStatus)
	c := Container{Name: "web", Image: "busybox", Cache: "warm"}
	c.PullFinished.Add(ms(587), SourceEventName)
	c.Created.Add(ms(640), SourceEventName)
	c.Started.Add(ms(700), SourceEventName)
	c.Started.Add(ms(0), SourceStatus)
	p.Containers = []Container{c}
	p.ContainersReady.Add(ms(1000), SourceStatus)
	p.Ready.Add(ms(1000), SourceStatus)
	tr := Build(p, Options{})

	sb := tr.Find("kubelet.sandbox")
	if !sb.Start.Equal(ms(400)) || !sb.End.Equal(ms(587)) || sb.Attr(AttrClamped) != nil {
		t.Fatalf("sandbox [%v, %v] %v, want [0.400, 0.587] unclamped", sb.Start.Sub(ms(0)), sb.End.Sub(ms(0)), sb.Attrs)
	}
	if u := sb.Attr(AttrUncertaintyEnd); u != 187.0 {
		t.Errorf("sandbox end uncertainty %v ms, want 187 (the window [0.400, 0.587])", u)
	}
	ctr := tr.Find("container/web")
	if !ctr.Start.Equal(sb.End) || ctr.Attr(AttrUncertaintyStart) != 187.0 {
		t.Errorf("container starts %v (%v), want at the sandbox's end with its uncertainty", ctr.Start.Sub(ms(0)), ctr.Attrs)
	}
	prev := ctr.Start
	for _, step := range []string{"image_pull", "create", "start"} {
		s := tr.Find("container/web/" + step)
		if s == nil || !s.Start.Equal(prev) {
			t.Fatalf("%s: want it to start where the step before ended (%v): %+v", step, prev.Sub(ms(0)), s)
		}
		prev = s.End
	}
	// Creation without a precise stamp: the whole second, narrowed by nothing before the bind.
	if u := tr.Root().Attr(AttrUncertaintyStart); u != 1000.0 {
		t.Errorf("root start uncertainty %v, want 1000 ms", u)
	}
	// ContainersReady at the whole second 1: after the last Started (0.700), in [1, 2).
	if k := tr.Phase(PhaseKubelet); !k.End.Equal(ms(1000)) || k.Attr(AttrUncertaintyEnd) != 1000.0 {
		t.Errorf("kubelet ends %v (%v), want 1 s with a second of uncertainty", k.End.Sub(ms(0)), k.Attrs)
	}
}
