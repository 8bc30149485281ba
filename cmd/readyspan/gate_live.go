package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/gate"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/pipeline"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/tracer"
)

// gateCollector keeps the traces a live gate's pipeline finishes, from the correlator's
// goroutine, and wakes the gate's wait on each.
type gateCollector struct {
	mu       sync.Mutex
	pods     []*phases.Trace
	rollouts []*rollout.Trace
	changed  chan struct{}
}

func newGateCollector() *gateCollector { return &gateCollector{changed: make(chan struct{}, 1)} }

func (c *gateCollector) pod(t *phases.Trace) {
	c.mu.Lock()
	c.pods = append(c.pods, t)
	c.mu.Unlock()
	c.wake()
}

func (c *gateCollector) rollout(t *rollout.Trace) {
	c.mu.Lock()
	c.rollouts = append(c.rollouts, t)
	c.mu.Unlock()
	c.wake()
}

func (c *gateCollector) wake() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

func (c *gateCollector) snapshot() ([]*phases.Trace, []*rollout.Trace) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*phases.Trace(nil), c.pods...), append([]*rollout.Trace(nil), c.rollouts...)
}

// waitFor waits until done holds of what was collected, ctx ends or wait passes; it reports
// whether done held.
func (c *gateCollector) waitFor(ctx context.Context, wait time.Duration, done func([]*phases.Trace, []*rollout.Trace) bool) bool {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		if done(c.snapshot()) {
			return true
		}
		select {
		case <-c.changed:
		case <-deadline.C:
			return done(c.snapshot())
		case <-ctx.Done():
			return false
		}
	}
}

// liveGate is a gate's running pipeline.
type liveGate struct {
	col    *gateCollector
	p      *pipeline.Live
	client kubernetes.Interface
	cancel context.CancelFunc
	done   chan struct{}
}

// startLive watches namespaces (nil: all) until stop, every trace into a collector. Pods Ready
// before it watched are not traced (no backfill), nor is a rollout already over.
func (g *gateFlags) startLive(ctx context.Context, namespaces []string) (*liveGate, error) {
	client, jsonClient, restCfg, err := g.kf.client()
	if err != nil {
		return nil, err
	}
	col := newGateCollector()
	cfg := g.tf.config()
	cfg.Backfill = false
	o := pipeline.Options{Trace: cfg, Watch: g.kf.watchConfig(namespaces, jsonClient)}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	p := pipeline.NewLive(o, pipeline.Env{Client: client, Host: restCfg.Host},
		pipeline.Sinks{Pods: tracer.SinkFunc(col.pod), Rollouts: tracker.SinkFunc(col.rollout)})
	runCtx, cancel := context.WithCancel(ctx)
	runCtx, stop, err := p.Source.StartFor(runCtx, 0)
	if err != nil {
		cancel()
		return nil, err
	}
	syncCtx, syncCancel := context.WithTimeout(runCtx, 2*time.Minute)
	defer syncCancel()
	if err := p.Source.Watcher().WaitForSync(syncCtx); err != nil {
		stop()
		cancel()
		return nil, fmt.Errorf("watch %s: %w", restCfg.Host, err)
	}
	l := &liveGate{col: col, p: p, client: client, done: make(chan struct{})}
	l.cancel = func() { stop(); cancel() }
	go func() { p.Run(runCtx); close(l.done) }()
	return l, nil
}

// stop ends the pipeline; flush then exports every Pod still starting as in progress (the
// correlator is the caller's alone once its loop returned).
func (l *liveGate) stop(flush bool) {
	l.cancel()
	<-l.done
	if flush && l.p.Correlator != nil {
		l.p.Correlator.Flush(phases.OutcomeInProgress)
	}
}

// rollout waits for the target's rollout in progress, or the next, to end, then for its new
// Pods' traces still settling.
func (g *gateFlags) rollout(ctx context.Context, target gateTarget, stderr io.Writer) (gateJob, error) {
	ns, err := g.kf.namespace()
	if err != nil {
		return gateJob{}, err
	}
	job := gateJob{title: target.arg + "/" + target.name + " -n " + ns}
	l, err := g.startLive(ctx, []string{ns})
	if err != nil {
		return gateJob{}, err
	}
	started := time.Now()
	fmt.Fprintf(stderr, "%s: waiting for the rollout of %s/%s in %s to end: the one in progress, else the next (--timeout %s)\n",
		prog, target.arg, target.name, ns, g.timeout)
	var rt *rollout.Trace
	l.col.waitFor(ctx, g.timeout, func(_ []*phases.Trace, rs []*rollout.Trace) bool {
		for _, r := range rs {
			if w := r.Rollout.Workload; w.Kind == target.kind && w.Name == target.name && w.Namespace == ns {
				rt = r
				return true
			}
		}
		return false
	})
	if ctx.Err() != nil {
		l.stop(false)
		return gateJob{}, fmt.Errorf("interrupted waiting for the rollout of %s/%s", target.arg, target.name)
	}
	if rt == nil {
		l.stop(false)
		job.failed = fmt.Sprintf("timed out after %s: no rollout of %s/%s ended", g.timeout, target.arg, target.name)
		return job, nil
	}
	l.col.waitFor(ctx, podTraceGrace, func(pods []*phases.Trace, _ []*rollout.Trace) bool {
		in, _ := rolloutInput(rt, byUID(pods))
		return len(in.Pods) == len(rt.Rollout.NewPods)
	})
	l.stop(false)
	pods, _ := l.col.snapshot()
	job.in, job.notes = rolloutInput(rt, byUID(pods))
	which := "the next rollout, begun after the gate started"
	if rt.Root().Start.Before(started) {
		which = "the rollout in progress when the gate started"
	}
	job.notes = append([]string{fmt.Sprintf("judged %s: %s, generation %d, revision %s, %s",
		which, rt.Summary.Kind, rt.Rollout.Generation, rt.Rollout.Revision, rt.Summary.Outcome)}, job.notes...)
	return job, nil
}

// windowed judges every Pod created in the window: after it, the gate waits up to
// --wait-starting for those still starting, then exports the rest as in progress (stuck).
func (g *gateFlags) windowed(ctx context.Context, stderr io.Writer) (gateJob, error) {
	namespaces, err := g.kf.watched()
	if err != nil {
		return gateJob{}, err
	}
	job := gateJob{title: fmt.Sprintf("window %s in %s", g.window, namespacesText(namespaces))}
	l, err := g.startLive(ctx, namespaces)
	if err != nil {
		return gateJob{}, err
	}
	// Creation times are whole seconds: a Pod created in the window's first second counts.
	from := time.Now().Truncate(time.Second)
	fmt.Fprintf(stderr, "%s: judging every Pod created in %s in the next %s, then waiting up to %s for those still starting\n",
		prog, namespacesText(namespaces), g.window, g.waitStarting)
	select {
	case <-time.After(g.window):
	case <-ctx.Done():
		l.stop(false)
		return gateJob{}, fmt.Errorf("interrupted in the window")
	}
	expected, err := createdSince(ctx, l.client, namespaces, g.kf.selector, from)
	if err != nil {
		l.stop(false)
		return gateJob{}, err
	}
	l.col.waitFor(ctx, g.waitStarting, func(pods []*phases.Trace, _ []*rollout.Trace) bool {
		seen := byUID(pods)
		for uid := range expected {
			if seen[uid] == nil {
				return false
			}
		}
		return true
	})
	l.stop(true)
	pods, rollouts := l.col.snapshot()
	job.in = gate.Input{Pods: createdFrom(pods, from), Rollouts: rollouts}
	if n := countOutcome(job.in.Pods, phases.OutcomeInProgress); n > 0 {
		job.notes = append(job.notes, fmt.Sprintf("%d Pods were still starting %s after the window: they count as stuck, or under the failure they showed", n, g.waitStarting))
	}
	return job, nil
}

// createdSince lists the UIDs of the Pods created since from: the Pods the window waits for.
func createdSince(ctx context.Context, client kubernetes.Interface, namespaces []string, selector string, from time.Time) (map[string]bool, error) {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	out := map[string]bool{}
	for _, ns := range namespaces {
		list, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, fmt.Errorf("list pods in %s: %w", namespacesText(namespaces), err)
		}
		for i := range list.Items {
			if p := &list.Items[i]; !p.CreationTimestamp.Time.Before(from) {
				out[string(p.UID)] = true
			}
		}
	}
	return out, nil
}

// createdFrom are the traces of Pods created at or after from.
func createdFrom(pods []*phases.Trace, from time.Time) []*phases.Trace {
	var out []*phases.Trace
	for _, t := range pods {
		if c, ok := t.Pod.Created.Resolve(); ok && !c.Time().Before(from) {
			out = append(out, t)
		}
	}
	return out
}

func countOutcome(pods []*phases.Trace, o phases.Outcome) int {
	n := 0
	for _, t := range pods {
		if t.Summary.Outcome == o {
			n++
		}
	}
	return n
}
