package tracer

import (
	"path/filepath"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// BenchmarkCacheBytesPerPod measures what each copy of the objects costs once a Pod's startup
// is over: what the Watcher keeps of every object but Events until it is deleted (its identity, Registry.LastSeen),
// what an informer's store would keep instead (every object, transformed: the second cache the
// Watcher no longer has), the correlator's maps, and the Watcher and correlator together. It feeds copies of a
// real captured startup (run8: its Pod versions, owners and core Events, as the Watcher sees
// them) with distinct names and UIDs. Run with -benchtime=1x; figures are heap bytes per Pod.
func BenchmarkCacheBytesPerPod(b *testing.B) {
	template, err := Kinds.LoadRecording(filepath.Join("testdata", "real-node", "run8-slow-pull-watch"))
	if err != nil {
		b.Fatal(err)
	}
	const copies = 2000
	type held struct {
		stores map[watch.Resource]cache.Store
		corr   *Correlator
	}
	whole := func(o k8sruntime.Object) k8sruntime.Object { return o }
	// watcherKeeps: keep is the Watcher's, which keeps no Event at all.
	fill := func(keep func(k8sruntime.Object) k8sruntime.Object, watcherKeeps, withCorrelator bool) (bytes uint64, pods int, h held) {
		before := heapAlloc()
		h.stores = map[watch.Resource]cache.Store{}
		if withCorrelator {
			h.corr = New(Config{Backfill: true}, SinkFunc(func(*phases.Trace) {}), nil, nil)
		}
		uids := map[string]bool{}
		for n := 0; n < copies; n++ {
			for _, d := range template {
				if _, ok := d.Object.(*eventsv1.Event); ok || d.Object == nil {
					continue // the Watcher reads core Events only; audit entries are not cached
				}
				d = relabel(d, n)
				t, _ := Kinds.Transform(d.Object.DeepCopyObject())
				d.Object = t.(k8sruntime.Object)
				if p, ok := d.Object.(*corev1.Pod); ok {
					uids[string(p.UID)] = true
				}
				if keep != nil && (!watcherKeeps || Kinds.KeepsIdentity(d.Resource)) {
					s := h.stores[d.Resource]
					if s == nil {
						s = cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{})
						h.stores[d.Resource] = s
					}
					if d.Type == watch.Deleted {
						_ = s.Delete(d.Object)
					} else {
						_ = s.Update(keep(d.Object))
					}
				}
				if withCorrelator {
					if !d.Recv.IsZero() {
						h.corr.Tick(d.Recv) // run the deadlines as Replay does, so finished Pods leave
					}
					h.corr.Handle(d)
				}
			}
			if withCorrelator {
				h.corr.Drain() // the copy's startups are over: what is Ready leaves, as after Settle
			}
		}
		return heapAlloc() - before, len(uids), h
	}
	for i := 0; i < b.N; i++ {
		informer, _, h := fill(whole, false, false)
		runtime.KeepAlive(h)
		watcher, pods, h := fill(Kinds.LastSeen, true, false)
		runtime.KeepAlive(h)
		corr, _, h := fill(nil, false, true)
		runtime.KeepAlive(h)
		both, _, h := fill(Kinds.LastSeen, true, true)
		runtime.KeepAlive(h)
		if pods == 0 {
			b.Fatal("no Pods in the recording")
		}
		b.ReportMetric(float64(informer)/float64(pods), "informer-store-B/pod")
		b.ReportMetric(float64(watcher)/float64(pods), "watcher-B/pod")
		b.ReportMetric(float64(corr)/float64(pods), "correlator-B/pod")
		b.ReportMetric(float64(both)/float64(pods), "both-B/pod")
		b.ReportMetric(float64(pods), "pods")
		b.ReportMetric(float64(h.corr.InFlight()), "in-flight")
	}
}

// heapAlloc is the live heap after a full collection.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
