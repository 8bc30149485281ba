package watch_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// waitProblem polls watch.Problem until want(problem) or the deadline, and returns the last answer.
func waitProblem(t *testing.T, w *watch.Watcher, within time.Duration, want func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		p := w.Problem()
		if want(p) || time.Now().After(deadline) {
			return p
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An apiserver that stops answering makes readyspan unready once the grace has passed (not
// before), with the error; answering again makes it ready at the next probe.
func TestFollowReachability(t *testing.T) {
	watch.SetOutageGrace(t, 100*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := watch.NewWatcher(fake.NewClientset(), tracer.Kinds, watch.Config{}, nil, nil)
	w.SetSynced()
	var down atomic.Bool
	go w.FollowReachability(ctx, 10*time.Millisecond, func(context.Context) error {
		if down.Load() {
			return errors.New("dial tcp 127.0.0.1:16443: i/o timeout")
		}
		return nil
	})
	if p := waitProblem(t, w, 50*time.Millisecond, func(p string) bool { return p != "" }); p != "" {
		t.Fatalf("answering apiserver: watch.Problem() = %q, want ready", p)
	}
	down.Store(true)
	cut := time.Now()
	p := waitProblem(t, w, 2*time.Second, func(p string) bool { return p != "" })
	if !strings.Contains(p, "the apiserver has not answered") || !strings.Contains(p, "i/o timeout") {
		t.Fatalf("cut off: watch.Problem() = %q, want the apiserver's silence and its error", p)
	}
	if since := time.Since(cut); since < watch.OutageGrace() {
		t.Errorf("unready %v after the first failed probe, before the %v grace", since, watch.OutageGrace())
	}
	down.Store(false)
	if p := waitProblem(t, w, 2*time.Second, func(p string) bool { return p == "" }); p != "" {
		t.Fatalf("answering again: watch.Problem() = %q, want ready", p)
	}
}

// A resource whose list keeps failing (not forbidden, not expired) makes readyspan unready after
// the grace, naming it; once a list completes it is ready again. Through the real informers.
func TestWatchFailingThenWorking(t *testing.T) {
	watch.SetOutageGrace(t, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := fake.NewClientset()
	var failing atomic.Bool
	failing.Store(true)
	client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failing.Load() {
			return true, nil, errors.New("Get \"https://127.0.0.1:16443/api/v1/services\": dial tcp 127.0.0.1:16443: connect: connection refused")
		}
		return false, nil, nil
	})
	errs := &watch.CountErrors{}
	w := watch.NewWatcher(client, tracer.Kinds, watch.Config{}, errs, nil)
	w.Start(ctx)
	w.SetSynced() // the other caches' sync is not what this is about
	p := waitProblem(t, w, 3*time.Second, func(p string) bool { return p != "" })
	if !strings.Contains(p, "listing and watching services has failed") || !strings.Contains(p, "connection refused") {
		t.Fatalf("failing list: watch.Problem() = %q, want services named with the error", p)
	}
	if errs.Snapshot()["services/other"] == 0 {
		t.Errorf("the failure was not counted: %v", errs.Snapshot())
	}
	failing.Store(false) // the reflector retries after its backoff (800 ms at first)
	if p := waitProblem(t, w, 5*time.Second, func(p string) bool { return p == "" }); p != "" {
		t.Fatalf("list works again: watch.Problem() = %q, want ready", p)
	}
}

// A refused list stops making readyspan unready as soon as a list is allowed, though the
// resource may hold nothing to send (the refusal was cleared per object received before).
func TestForbiddenThenAllowedEmpty(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := fake.NewClientset()
	var refused atomic.Bool
	refused.Store(true)
	client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		if refused.Load() {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", watch.ErrForbidden)
		}
		return false, nil, nil
	})
	w := watch.NewWatcher(client, tracer.Kinds, watch.Config{}, &watch.CountErrors{}, nil)
	w.Start(ctx)
	if p := waitProblem(t, w, 3*time.Second, func(p string) bool { return strings.Contains(p, "forbidden") }); !strings.Contains(p, "endpointslices") {
		t.Fatalf("refused: watch.Problem() = %q, want endpointslices forbidden", p)
	}
	refused.Store(false)
	if err := w.WaitForSync(ctx); err != nil {
		t.Fatalf("sync after the refusal was lifted: %v", err)
	}
	if p := waitProblem(t, w, 5*time.Second, func(p string) bool { return p == "" }); p != "" {
		t.Fatalf("allowed, no EndpointSlice to send: watch.Problem() = %q, want ready", p)
	}
}
