package web

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// BenchmarkRingScale fills a ring to its default sizes from a real capture (run8: Pod traces of
// replays of their own, and its rollout grown to 1,000 Pods) and reports what it holds:
// Ring.Bytes and the heap it takes, per Pod trace and per 1,000-Pod rollout. Run with
// -benchtime=1x.
//
// Measured (go1.26, amd64, 2 cores): 6.1 KB per Pod trace by Ring.Bytes (5.2 KB of heap: its
// spans), and 0.46 MB per 1,000-Pod rollout (0.47 MB of heap). A full ring at the default counts
// holds about 12 MB of Pods; 200 rollouts of 1,000 Pods would be 92 MB, so the byte budget
// (64 MiB) bounds it.
func BenchmarkRingScale(b *testing.B) {
	dir := captures.Path("run8-slow-pull-watch")
	deltas, err := tracer.Kinds.LoadRecording(dir)
	if err != nil {
		b.Fatal(err)
	}
	_, rollouts := replay(b, dir)
	big := grow(rollouts[0].Rollout, 1000)
	for i := 0; i < b.N; i++ {
		before := heapAlloc()
		ring := NewRing(RingConfig{})
		for n := 0; n < DefaultMaxPods; {
			// A replay of its own for each copy: live traces share no spans, and what the ring
			// keeps of a trace is what it costs.
			for _, p := range replayDeltas(deltas) {
				pod := *p.Pod
				pod.UID = fmt.Sprintf("%s-%d", pod.UID, n)
				p.Pod = &pod
				ring.AddPod(p)
				if n++; n == DefaultMaxPods {
					break
				}
			}
		}
		podBytes, podHeap := ring.Bytes(), heapAlloc()-before
		runtime.KeepAlive(ring)
		b.ReportMetric(float64(podBytes)/DefaultMaxPods, "bytes/pod")
		b.ReportMetric(float64(podHeap)/DefaultMaxPods, "heap-bytes/pod")

		ring = NewRing(RingConfig{MaxBytes: 1 << 40})
		before = heapAlloc()
		const n = 5
		for g := 0; g < n; g++ {
			big.Generation = int64(g)
			ring.AddRollout(rollout.Build(big))
		}
		b.ReportMetric(float64(ring.Bytes())/n, "bytes/1000-pod-rollout")
		b.ReportMetric(float64(heapAlloc()-before)/n, "heap-bytes/1000-pod-rollout")
		runtime.KeepAlive(ring)
	}
}

func replayDeltas(deltas []watch.Delta) []*phases.Trace {
	var pods []*phases.Trace
	c := tracer.New(tracer.Config{Backfill: true}, tracer.SinkFunc(func(tr *phases.Trace) { pods = append(pods, tr) }), nil, nil)
	tracer.Replay(c, deltas)
	return pods
}

// grow copies a rollout's new Pods until it has n.
func grow(r *rollout.Rollout, n int) *rollout.Rollout {
	c := *r
	c.NewPods = nil
	for i := 0; i < n; i++ {
		p := r.NewPods[i%len(r.NewPods)]
		p.UID, p.Name = fmt.Sprintf("%s-%d", p.UID, i), fmt.Sprintf("%s-%d", p.Name, i)
		c.NewPods = append(c.NewPods, p)
	}
	c.Steps = append([]rollout.Step(nil), r.Steps...)
	for i := range c.Steps {
		c.Steps[i].Pods = nil
		for _, p := range c.NewPods {
			c.Steps[i].Pods = append(c.Steps[i].Pods, p.UID)
		}
	}
	return &c
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
