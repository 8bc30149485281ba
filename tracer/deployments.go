package tracer

import (
	"context"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/rollout/tracker"
	"github.com/readyspan/readyspan/watch"
)

// Deployments (apps/v1): the workload whose changes start rollouts (rollout/tracker) and whose
// ScalingReplicaSet Events stamp each ReplicaSet's scale-up.
const (
	ResourceDeployments watch.Resource = "deployments"
	StreamDeployments   watch.Stream   = "deployments"
)

// deploymentKind is the registry entry of Deployments.
var deploymentKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceDeployments, Stream: StreamDeployments, Kind: "Deployment",
		GVR:       appsv1.SchemeGroupVersion.WithResource("deployments"),
		NewObject: func() runtime.Object { return &appsv1.Deployment{} },
		NewList:   func() runtime.Object { return &appsv1.DeploymentList{} },
		ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*appsv1.DeploymentList] {
			return c.AppsV1().Deployments(ns)
		}),
		Transform: func(o runtime.Object) {
			d := o.(*appsv1.Deployment)
			tracker.SlimWorkload(d, &d.Spec.Template, &d.ObjectMeta)
		},
		KeepsIdentity: true, Workload: true, Audit: workloadWrites,
		TemplateHashLabel: appsv1.DefaultDeploymentUniqueLabelKey,
		Snapshot:          watch.SnapshotWorkloads, Verbs: watch.ReadVerbs,
		Explain: []string{"deployment", "deployments", "deploy"},
		Get: func(ctx context.Context, c kubernetes.Interface, ns, name string) (metav1.Object, error) {
			return c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		},
		Rollouts: true,
	},
	scalesReplicaSets: true,
	// The deployment controller: "Scaled up replica set web-7d4b9 from 1 to 2".
	step: func(st *rollout.Step, reason, msg string) (bool, bool) {
		return scalingReplicaSet(st, reason, msg, "Scaled up replica set ", "Scaled down replica set ")
	},
	handle: func(c *Correlator, d watch.Delta) {
		c.handleWorkloadChange(&d, &d.Object.(*appsv1.Deployment).ObjectMeta)
	},
	rollout:       func(r *tracker.Tracker, d watch.Delta) { r.HandleDeployment(&d, d.Object.(*appsv1.Deployment)) },
	events:        func(c *Correlator, e *events.Event) bool { return c.handleDeploymentEvent(e) },
	rolloutEvents: func(r *tracker.Tracker, e *events.Event) bool { return r.HandleEvent(e) },
}

// handleDeploymentEvent reads ScalingReplicaSet events: "Scaled up replica set NAME from A to B"
// stamps a ReplicaSet scale-up with the controller's nanosecond clock. It returns false for a
// ScalingReplicaSet message in a format it does not know (the deployment controller writes
// "Scaled up replica set %s from %d to %d" and "Scaled down replica set %s from %d to %d").
func (c *Correlator) handleDeploymentEvent(e *events.Event) bool {
	if e.Reason != "ScalingReplicaSet" {
		return true
	}
	st, _, known := stepOf(e)
	if !known {
		return false
	}
	if !st.Up {
		return true // scale-downs say nothing about starting Pods
	}
	if e.Count > 1 {
		// A rewrite of a combined Event: its stamps are its first occurrence's, a different
		// scale-up; the ReplicaSet's own watch time dates this one. Its first version (after
		// ten steps of one Deployment in ten minutes, every next one) is this step's.
		return true
	}
	combined := strings.HasPrefix(e.Message, events.CombinedPrefix)
	for _, rs := range c.replicaSets {
		if rs.name != st.Target || rs.namespace != e.Namespace {
			continue
		}
		// The step the event states: the latest one watched with its counts and not yet
		// stated, not after the event (the ReplicaSet's update is seen about when the event
		// is written, either first). Matched by time alone, steps two seconds apart took
		// each other's events.
		at := e.When().At
		for i := len(rs.scaleUps) - 1; i >= 0; i-- {
			s := &rs.scaleUps[i]
			if s.event == nil && s.counts(st.From, st.To) && s.at() <= at+phases.Instant(scaleEventSlack) {
				s.event, s.combined = e, combined
				if s.from < 0 {
					s.from = st.From
				}
				if s.to < 0 {
					s.to = st.To
				}
				return true
			}
		}
		rs.add(scaleUp{from: st.From, to: st.To, event: e, combined: combined})
		return true
	}
	c.pendingScale = append(c.pendingScale, e)
	if len(c.pendingScale) > maxPendingEvents {
		c.pendingScale = c.pendingScale[1:]
	}
	return true
}
