package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/safetext"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// Target is what explain is asked about: a Pod, or a workload of one of tracer.Kinds.ExplainKinds.
type Target struct {
	Kind      string // "Pod", "Deployment", …
	Namespace string
	Name      string
}

// Explain rebuilds target's traces from what the API still holds (objects, conditions,
// statuses, and Events younger than their TTL): every kind the watch reads is listed in the
// namespace once and fed as an initial list, through the pipeline a replay uses with its
// default deadlines, since a snapshot has no time to tune. Only target's traces reach the
// sinks: a Pod's, or a workload's rollout and its current Pods.
func Explain(ctx context.Context, env Env, target Target, s Sinks) error {
	if err := watch.Reachable(ctx, env.Client, env.Host); err != nil {
		return err
	}
	if target.Kind == "Node" {
		return explainNode(ctx, env.Client, target.Name, s)
	}
	deltas, chosen, err := explainObjects(ctx, env.Client, target)
	if err != nil {
		return err
	}
	var only Sinks
	if s.Pods != nil {
		only.Pods = tracer.SinkFunc(func(t *phases.Trace) {
			if chosen.pods[t.Pod.UID] {
				s.Pods.Export(t)
			}
		})
	}
	if s.Rollouts != nil {
		only.Rollouts = tracker.SinkFunc(func(t *rollout.Trace) {
			if t.Rollout.Workload.UID == chosen.workload {
				s.Rollouts.ExportRollout(t)
			}
		})
	}
	Replay(Options{}, deltas, only)
	return nil
}

// explainTarget is what explain keeps: a Pod, or a workload's rollout and its current Pods.
type explainTarget struct {
	workload string
	pods     map[string]bool
}

// explainObjects lists what a reconstruction needs in the namespace and picks the target: the
// Pod, or the workload and the Pods it controls (a Deployment's through its ReplicaSets, a
// CronJob's through its Jobs).
func explainObjects(ctx context.Context, c kubernetes.Interface, t Target) ([]watch.Delta, explainTarget, error) {
	target := explainTarget{pods: map[string]bool{}}
	ns, kind, name := t.Namespace, t.Kind, t.Name
	owners := map[types.UID]bool{} // the workload, and the ReplicaSets or Jobs it controls
	if kind != "Pod" {
		o, err := tracer.Kinds.GetObject(ctx, c, kind, ns, name)
		if err != nil {
			return nil, target, notFound(strings.ToLower(kind), ns, name, err)
		}
		target.workload, owners[o.GetUID()] = string(o.GetUID()), true
	}
	// Everything readyspan watches in the namespace, as one list of each kind (the registry's),
	// then only the Pods explain was asked about: the rest of the chain (owners, Services,
	// Events, endpoints) is what their traces are rebuilt from.
	all, err := tracer.Kinds.Snapshot(ctx, c, ns)
	var le *watch.ListError
	if errors.As(err, &le) {
		return nil, target, apiErr("list "+string(le.Resource), ns, le.Err)
	} else if err != nil {
		return nil, target, err
	}
	for _, d := range all {
		if _, ok := d.Object.(*corev1.Pod); ok {
			continue
		}
		if m, err := meta.Accessor(d.Object); err == nil {
			if ref := metav1.GetControllerOf(m); ref != nil && owners[ref.UID] {
				owners[m.GetUID()] = true
			}
		}
	}
	deltas := all[:0]
	for _, d := range all {
		p, ok := d.Object.(*corev1.Pod)
		if !ok {
			deltas = append(deltas, d)
			continue
		}
		ref := metav1.GetControllerOf(p)
		if kind == "Pod" && p.Name == name || kind != "Pod" && ref != nil && owners[ref.UID] {
			target.pods[string(p.UID)] = true
			deltas = append(deltas, d)
		}
	}
	if kind == "Pod" && len(target.pods) == 0 {
		return nil, target, fmt.Errorf("pod %s/%s not found", ns, name)
	}
	return deltas, target, nil
}

func notFound(kind, ns, name string, err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s %s/%s not found", kind, ns, name)
	}
	return apiErr("get "+kind, ns, err)
}

func apiErr(action, ns string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%s in %s: forbidden: %s", action, ns, safetext.OneLine(err))
	}
	return fmt.Errorf("%s in %s: %s", action, ns, safetext.OneLine(err))
}

// explainNode rebuilds a Node's startup from what the API holds: the Node, its NodeClaim, and the
// Pods bound to it (its DaemonSet Pods, those that waited for it), listed cluster-wide once.
// Only the Node's trace reaches the sinks.
func explainNode(ctx context.Context, c kubernetes.Interface, name string, s Sinks) error {
	if s.Nodes == nil {
		return nil
	}
	if _, err := tracer.Kinds.GetObject(ctx, c, "Node", "", name); apierrors.IsNotFound(err) {
		return fmt.Errorf("node %s not found", name)
	} else if err != nil {
		return apiErr("get node", "the cluster", err)
	}
	all, err := tracer.Kinds.Snapshot(ctx, c, metav1.NamespaceAll)
	var le *watch.ListError
	if errors.As(err, &le) {
		return apiErr("list "+string(le.Resource), "every namespace", le.Err)
	} else if err != nil {
		return err
	}
	deltas := all[:0]
	for _, d := range all {
		if p, ok := d.Object.(*corev1.Pod); ok && p.Spec.NodeName != name {
			continue
		}
		deltas = append(deltas, d)
	}
	only := tracer.NodeSinkFunc(func(t *node.Trace) {
		if t.Startup.Name == name {
			s.Nodes.ExportNode(t)
		}
	})
	Replay(Options{Trace: tracer.Config{TraceNode: name}}, deltas, Sinks{Nodes: only})
	return nil
}
