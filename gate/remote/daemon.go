package remote

import (
	"context"
	"fmt"
	"net/url"

	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/web"
	"github.com/readyspan/readyspan/web/apiclient"
)

// Bounds of the daemon's answers: a list of a full ring, a rollout's view (a 1,000-Pod rollout
// is about 0.5 MB), one Pod's view.
const (
	maxListBytes    = 256 << 20
	maxRolloutBytes = 64 << 20
	maxViewBytes    = 16 << 20
)

// Daemon reads one daemon's traces.
type Daemon struct {
	API *apiclient.Client
}

// Rollouts lists the rollouts the daemon holds, newest first: of namespace ("" for all), of its
// workload named workload ("" for all).
func (d *Daemon) Rollouts(ctx context.Context, namespace, workload string) ([]web.RolloutSummary, error) {
	return list(ctx, d, "api/v1/rollouts", namespace, workload, func(s web.RolloutSummary) string { return s.ID })
}

// list reads one of the API's lists, filtered as the UI filters, each entry's ID checked.
func list[T any](ctx context.Context, d *Daemon, path, namespace, workload string, id func(T) string) ([]T, error) {
	q := url.Values{}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	if workload != "" {
		q.Set("workload", workload)
	}
	var out []T
	if err := d.API.Get(ctx, path, q, maxListBytes, &out); err != nil {
		return nil, err
	}
	for _, e := range out {
		if err := apiclient.CheckID(id(e)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Rollout reads a rollout's view and its rotation spans, rebuilt as its trace. A rollout the
// daemon no longer holds is apiclient.ErrNotHeld.
func (d *Daemon) Rollout(ctx context.Context, id string) (*rollout.Trace, error) {
	if err := apiclient.CheckID(id); err != nil {
		return nil, err
	}
	var v web.RolloutView
	if err := d.API.Get(ctx, "api/v1/rollouts/"+id, nil, maxRolloutBytes, &v); err != nil {
		return nil, err
	}
	var rot []web.RotationView
	if err := d.API.Get(ctx, "api/v1/rollouts/"+id+"/rotation", nil, maxRolloutBytes, &rot); err != nil {
		return nil, err
	}
	t, err := rolloutTrace(&v, rot)
	if err != nil {
		return nil, fmt.Errorf("the daemon's rollout %s: %w", id, err)
	}
	return t, nil
}

// Pods lists the Pod traces the daemon holds, of namespace ("" for all), newest first.
func (d *Daemon) Pods(ctx context.Context, namespace string) ([]web.PodSummary, error) {
	return list(ctx, d, "api/v1/pods", namespace, "", func(s web.PodSummary) string { return s.UID })
}

// Pod reads a Pod's view, rebuilt as its trace. A Pod the daemon does not hold (yet, or no
// longer) is apiclient.ErrNotHeld.
func (d *Daemon) Pod(ctx context.Context, uid string) (*phases.Trace, error) {
	if err := apiclient.CheckID(uid); err != nil {
		return nil, err
	}
	var v web.PodView
	if err := d.API.Get(ctx, "api/v1/pods/"+uid, nil, maxViewBytes, &v); err != nil {
		return nil, err
	}
	t, err := podTrace(&v)
	if err != nil {
		return nil, fmt.Errorf("the daemon's trace of Pod %s: %w", apiclient.Cut(uid), err)
	}
	return t, nil
}
