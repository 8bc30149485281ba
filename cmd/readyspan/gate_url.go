package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/readyspan/readyspan/gate"
	"github.com/readyspan/readyspan/gate/remote"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/web"
	"github.com/readyspan/readyspan/web/apiclient"
)

// daemonPoll is how often gate --url asks the daemon again while it waits.
var daemonPoll = 2 * time.Second

// daemon is the client of the daemon --url names.
func (g *gateFlags) daemon() (*remote.Daemon, error) {
	api, err := apiclient.New(apiclient.Config{URL: g.url, TokenFile: g.tokenFile, CAFile: g.caFile})
	if err != nil {
		return nil, err
	}
	return &remote.Daemon{API: api}, nil
}

// poll asks cond every daemonPoll until it holds, wait passes or ctx ends; it reports whether
// cond held. An error of cond (the daemon down, an answer that is not its API) ends it.
func poll(ctx context.Context, wait time.Duration, cond func() (bool, error)) (bool, error) {
	deadline := time.Now().Add(wait)
	for {
		if ok, err := cond(); ok || err != nil {
			return ok, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(min(daemonPoll, left)):
		}
	}
}

// rolloutFromDaemon waits, polling the daemon, for the target's rollout in progress, or the
// next, to end in its ring, then for its new Pods' traces still settling.
func (g *gateFlags) rolloutFromDaemon(ctx context.Context, target gateTarget, stderr io.Writer) (gateJob, error) {
	ns, err := g.kf.namespace()
	if err != nil {
		return gateJob{}, err
	}
	d, err := g.daemon()
	if err != nil {
		return gateJob{}, err
	}
	job := gateJob{title: target.arg + "/" + target.name + " -n " + ns}
	started := time.Now()
	mine := func() ([]web.RolloutSummary, error) {
		list, err := d.Rollouts(ctx, ns, target.name)
		var out []web.RolloutSummary
		for _, s := range list {
			if s.WorkloadKind == target.kind && s.Workload == target.name && s.Namespace == ns {
				out = append(out, s)
			}
		}
		return out, err
	}
	before, err := mine()
	if err != nil {
		return gateJob{}, err
	}
	over, running := map[string]bool{}, map[string]bool{}
	for _, s := range before {
		if s.Outcome == string(rollout.OutcomeInProgress) {
			running[s.ID] = true
		} else {
			over[s.ID] = true
		}
	}
	fmt.Fprintf(stderr, "%s: waiting for the rollout of %s/%s in %s to end in the daemon's traces: the one in progress, else the next (--timeout %s)\n",
		prog, target.arg, target.name, ns, g.timeout)
	var id string
	ended, err := poll(ctx, g.timeout, func() (bool, error) {
		list, err := mine()
		for _, s := range list { // newest first: the last one kept is the earliest
			if !over[s.ID] && s.Outcome != string(rollout.OutcomeInProgress) {
				id = s.ID
			}
		}
		return id != "", err
	})
	switch {
	case ctx.Err() != nil:
		return gateJob{}, fmt.Errorf("interrupted waiting for the rollout of %s/%s", target.arg, target.name)
	case err != nil:
		return gateJob{}, err
	case !ended:
		job.failed = fmt.Sprintf("timed out after %s: no rollout of %s/%s ended", g.timeout, target.arg, target.name)
		return job, nil
	}
	rt, err := d.Rollout(ctx, id)
	if err != nil {
		return gateJob{}, err
	}
	traced, err := daemonPods(ctx, d, rt)
	if err != nil {
		return gateJob{}, err
	}
	job.in, job.notes = rolloutInput(rt, traced)
	which := "the next rollout, begun after the gate started"
	if running[id] || rt.Root().Start.Before(started) {
		which = "the rollout in progress when the gate started"
	}
	job.notes = append([]string{fmt.Sprintf("judged %s: %s, generation %d, revision %s, %s",
		which, rt.Summary.Kind, rt.Rollout.Generation, rt.Rollout.Revision, rt.Summary.Outcome)}, job.notes...)
	return job, nil
}

// daemonPods reads the rollout's new Pods' traces, waiting up to podTraceGrace for those the
// daemon does not hold yet (still settling).
func daemonPods(ctx context.Context, d *remote.Daemon, rt *rollout.Trace) (map[string]*phases.Trace, error) {
	traced := map[string]*phases.Trace{}
	_, err := poll(ctx, podTraceGrace, func() (bool, error) {
		for _, np := range rt.Rollout.NewPods {
			if traced[np.UID] != nil {
				continue
			}
			t, err := d.Pod(ctx, np.UID)
			switch {
			case errors.Is(err, apiclient.ErrNotHeld):
				continue
			case err != nil:
				return false, err
			}
			traced[np.UID] = t
		}
		return len(traced) == len(rt.Rollout.NewPods), nil
	})
	return traced, err
}

// windowFromDaemon judges the Pods whose startup began in the window, and the rollouts that
// ended in it, as the daemon holds them after the window and --wait-starting. The daemon lists
// a Pod only once its startup ended, so the gate cannot tell which are still starting: it
// waits all of --wait-starting.
func (g *gateFlags) windowFromDaemon(ctx context.Context, stderr io.Writer) (gateJob, error) {
	namespaces, err := g.kf.watched()
	if err != nil {
		return gateJob{}, err
	}
	ns := ""
	if len(namespaces) == 1 {
		ns = namespaces[0]
	}
	d, err := g.daemon()
	if err != nil {
		return gateJob{}, err
	}
	// A wrong --url or token fails now, not after the window.
	if _, err := d.Pods(ctx, ns); err != nil {
		return gateJob{}, err
	}
	job := gateJob{title: fmt.Sprintf("window %s in %s", g.window, namespacesText(namespaces))}
	from := time.Now().Truncate(time.Second)
	until := from.Add(g.window)
	fmt.Fprintf(stderr, "%s: judging every Pod whose startup begins in %s in the next %s, as the daemon traces them, %s after the window\n",
		prog, namespacesText(namespaces), g.window, g.waitStarting)
	select {
	case <-time.After(time.Until(until) + g.waitStarting):
	case <-ctx.Done():
		return gateJob{}, errors.New("interrupted in the window")
	}
	pods, gone, err := daemonWindowPods(ctx, d, ns, from, until)
	if err != nil {
		return gateJob{}, err
	}
	rollouts, err := daemonWindowRollouts(ctx, d, ns, from, time.Now())
	if err != nil {
		return gateJob{}, err
	}
	job.in = gate.Input{Pods: pods, Rollouts: rollouts}
	job.notes = append(job.notes, fmt.Sprintf("the daemon holds a Pod's trace once its startup ended (Ready; failed after its --fail-after; stuck after its --stuck-after): Pods still starting %s after the window are not judged", g.waitStarting))
	if gone > 0 {
		job.notes = append(job.notes, fmt.Sprintf("%d Pods of the window left the daemon's ring before they were read: not judged", gone))
	}
	return job, nil
}

// daemonWindowPods reads the traces of the Pods whose startup began in [from, until), and how
// many of them left the ring between the list and their read.
func daemonWindowPods(ctx context.Context, d *remote.Daemon, ns string, from, until time.Time) ([]*phases.Trace, int, error) {
	list, err := d.Pods(ctx, ns)
	if err != nil {
		return nil, 0, err
	}
	var out []*phases.Trace
	gone := 0
	for _, s := range slices.Backward(list) { // oldest first, as a live gate collects them
		start, err := time.Parse(time.RFC3339Nano, s.Start)
		if err != nil {
			return nil, 0, fmt.Errorf("the daemon listed Pod %s with start %q", s.UID, apiclient.Cut(s.Start))
		}
		if start.Before(from) || !start.Before(until) {
			continue
		}
		t, err := d.Pod(ctx, s.UID)
		switch {
		case errors.Is(err, apiclient.ErrNotHeld):
			gone++
			continue
		case err != nil:
			return nil, 0, err
		}
		out = append(out, t)
	}
	return out, gone, nil
}

// daemonWindowRollouts reads the rollouts that ended in [from, until).
func daemonWindowRollouts(ctx context.Context, d *remote.Daemon, ns string, from, until time.Time) ([]*rollout.Trace, error) {
	list, err := d.Rollouts(ctx, ns, "")
	if err != nil {
		return nil, err
	}
	var out []*rollout.Trace
	for _, s := range slices.Backward(list) {
		start, err := time.Parse(time.RFC3339Nano, s.Start)
		if err != nil {
			return nil, fmt.Errorf("the daemon listed rollout %s with start %q", s.ID, apiclient.Cut(s.Start))
		}
		end := start.Add(time.Duration(s.DurationMs * float64(time.Millisecond)))
		if s.Outcome == string(rollout.OutcomeInProgress) || end.Before(from) || !end.Before(until) {
			continue
		}
		rt, err := d.Rollout(ctx, s.ID)
		if errors.Is(err, apiclient.ErrNotHeld) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, rt)
	}
	return out, nil
}
