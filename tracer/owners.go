package tracer

import (
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/phases"
)

// controllerManager is the field manager of everything kube-controller-manager writes; any
// other manager of a Deployment's spec is a client (kubectl, helm, a GitOps controller).
const controllerManager = "kube-controller-manager"

// replicaSet is what readyspan keeps of a ReplicaSet: who owns it and when it was scaled up.
type replicaSet struct {
	name           string
	namespace      string
	deploymentUID  types.UID
	deploymentName string
	replicas       int32
	// scaleUps holds one Times per observed scale-up (creation included), oldest first.
	scaleUps []phases.Times
}

// deployment is what readyspan keeps of a Deployment: its spec changes and who made them.
type deployment struct {
	name       string
	namespace  string
	generation int64
	// changes holds one entry per observed spec change (generation), oldest first.
	changes []deploymentChange
}

type deploymentChange struct {
	client    string
	persisted phases.Times
}

func controllerOf(m *metav1.ObjectMeta) *metav1.OwnerReference {
	for i := range m.OwnerReferences {
		if r := &m.OwnerReferences[i]; r.Controller != nil && *r.Controller {
			return r
		}
	}
	return nil
}

// clientChange returns the newest managedFields entry of a client (not the controller manager)
// on the main resource: who last changed the spec, and when (1 s, apiserver clock).
func clientChange(m *metav1.ObjectMeta) (string, time.Time) {
	var who string
	var at time.Time
	for i := range m.ManagedFields {
		f := &m.ManagedFields[i]
		if f.Subresource != "" || f.Manager == controllerManager || f.Time == nil {
			continue
		}
		if f.Time.After(at) {
			who, at = f.Manager, f.Time.Time
		}
	}
	return who, at
}

func (c *Correlator) handleReplicaSet(d *Delta, rs *appsv1.ReplicaSet) {
	if d.Type == Deleted {
		delete(c.replicaSets, rs.UID)
		return
	}
	cur := c.replicaSets[rs.UID]
	replicas := int32(1)
	if rs.Spec.Replicas != nil {
		replicas = *rs.Spec.Replicas
	}
	if cur == nil {
		cur = &replicaSet{name: rs.Name, namespace: rs.Namespace}
		if owner := controllerOf(&rs.ObjectMeta); owner != nil && owner.Kind == "Deployment" {
			cur.deploymentUID, cur.deploymentName = owner.UID, owner.Name
		}
		c.replicaSets[rs.UID] = cur
		if replicas > 0 {
			var t phases.Times
			t.Add(rs.CreationTimestamp.Time, phases.SourceMetadata)
			if d.Type == Added {
				t.Add(d.watchTime(), phases.SourceWatch)
			}
			cur.scaleUps = append(cur.scaleUps, t)
		}
	} else if replicas > cur.replicas {
		var t phases.Times
		t.Add(d.watchTime(), phases.SourceWatch)
		cur.scaleUps = append(cur.scaleUps, t)
	}
	cur.replicas = replicas
	if len(cur.scaleUps) > maxHistory {
		cur.scaleUps = cur.scaleUps[len(cur.scaleUps)-maxHistory:]
	}
}

// maxHistory bounds the scale-ups and spec changes kept per object.
const maxHistory = 16

func (c *Correlator) handleDeployment(d *Delta, dep *appsv1.Deployment) {
	if d.Type == Deleted {
		delete(c.deployments, dep.UID)
		return
	}
	cur := c.deployments[dep.UID]
	if cur == nil {
		cur = &deployment{name: dep.Name, namespace: dep.Namespace}
		c.deployments[dep.UID] = cur
	}
	if dep.Generation == cur.generation {
		return
	}
	cur.generation = dep.Generation
	var ch deploymentChange
	var at time.Time
	ch.client, at = clientChange(&dep.ObjectMeta)
	if dep.Generation == 1 {
		at = dep.CreationTimestamp.Time
	}
	ch.persisted.Add(at, phases.SourceMetadata)
	ch.persisted.Add(d.watchTime(), phases.SourceWatch)
	cur.changes = append(cur.changes, ch)
	if len(cur.changes) > maxHistory {
		cur.changes = cur.changes[len(cur.changes)-maxHistory:]
	}
}

// handleDeploymentEvent reads ScalingReplicaSet events: "Scaled up replica set NAME from A to B"
// stamps a ReplicaSet scale-up with the controller's nanosecond clock. It returns false for a
// ScalingReplicaSet message in a format it does not know (the deployment controller writes
// "Scaled up replica set %s from %d to %d" and "Scaled down replica set %s from %d to %d").
func (c *Correlator) handleDeploymentEvent(e *event) bool {
	if e.Reason != "ScalingReplicaSet" {
		return true
	}
	var rsName string
	msg := strings.TrimPrefix(e.Message, combinedPrefix)
	switch {
	case strings.HasPrefix(msg, "Scaled up replica set "):
		rsName, _, _ = strings.Cut(strings.TrimPrefix(msg, "Scaled up replica set "), " ")
	case strings.HasPrefix(msg, "Scaled down replica set "):
		return true // scale-downs say nothing about starting Pods
	default:
		return false
	}
	if e.Count > 1 || strings.HasPrefix(e.Message, combinedPrefix) {
		// A rewrite of a combined Event: its stamps are its first occurrence's, a different
		// scale-up; the ReplicaSet's own watch time dates this one.
		return true
	}
	for _, rs := range c.replicaSets {
		if rs.name != rsName || rs.namespace != e.Namespace {
			continue
		}
		// Attach the event to the scale-up it describes: the latest one not after it.
		at := e.when().At
		best := -1
		for i, su := range rs.scaleUps {
			if s, ok := su.Earliest(); ok && s.At <= at+phases.Instant(2*time.Second) {
				best = i
			}
		}
		if best < 0 {
			var t phases.Times
			rs.scaleUps = append([]phases.Times{t}, rs.scaleUps...)
			best = 0
		}
		e.firstStamps(&rs.scaleUps[best])
		return true
	}
	c.pendingScale = append(c.pendingScale, e)
	if len(c.pendingScale) > maxPendingEvents {
		c.pendingScale = c.pendingScale[1:]
	}
	return true
}

// rootOf fills the chain's start for a Pod from its owners: the Deployment change that led to
// the ReplicaSet scale-up that created the Pod, or, when the ReplicaSet replaced a Pod with no
// scale-up (self-healing), the ReplicaSet itself.
func (c *Correlator) rootOf(ps *podState, obs *phases.Pod) {
	owner := controllerOf(&ps.pod.ObjectMeta)
	switch {
	case owner == nil:
		obs.Root = phases.RootBarePod
		obs.Client = ps.creator
		created, _ := ps.created.Earliest()
		applyAudit(obs, c.auditFor("pods", ps.pod.Namespace, ps.pod.Name, created.Time()))
		return
	case owner.Kind != "ReplicaSet":
		obs.Root = phases.RootController
		return
	}
	obs.ReplicaSet = owner.Name
	rs := c.replicaSets[owner.UID]
	if rs == nil {
		obs.Root = phases.RootReplicaSet
		return
	}
	obs.Deployment = rs.deploymentName
	created, _ := ps.created.Earliest()
	var scale phases.Times
	for _, su := range rs.scaleUps {
		if s, ok := su.Earliest(); ok && !s.Time().After(created.Time().Add(2*time.Second)) && created.Time().Sub(s.Time()) < selfHealWindow {
			scale = su
		}
	}
	if scale == nil || rs.deploymentUID == "" {
		obs.Root = phases.RootReplicaSet
		obs.Client = controllerManager
		return
	}
	obs.Root = phases.RootDeployment
	obs.ReplicaSetScaled = scale
	dep := c.deployments[rs.deploymentUID]
	if dep == nil {
		return
	}
	scaledAt, _ := scale.Earliest()
	for i := len(dep.changes) - 1; i >= 0; i-- {
		ch := dep.changes[i]
		if s, ok := ch.persisted.Earliest(); ok && !s.Time().After(scaledAt.Time().Add(time.Second)) {
			obs.RootPersisted = ch.persisted
			obs.Client = ch.client
			applyAudit(obs, c.auditFor("deployments", dep.namespace, dep.name, scaledAt.Time()))
			return
		}
	}
}

// selfHealWindow: a Pod created longer than this after its ReplicaSet's last scale-up was not
// created by that scale-up but to replace a Pod (self-healing).
const selfHealWindow = 10 * time.Minute

// handleReplicaSetEvent reads SuccessfulCreate ("Created pod: NAME"): the replicaset
// controller's nanosecond stamp, taken right after the create returned. It returns false for a
// SuccessfulCreate message in another format.
func (c *Correlator) handleReplicaSetEvent(e *event) bool {
	if e.Reason != "SuccessfulCreate" {
		return true
	}
	name, ok := strings.CutPrefix(strings.TrimPrefix(e.Message, combinedPrefix), "Created pod: ")
	if !ok {
		return false
	}
	if e.Count > 1 || strings.HasPrefix(e.Message, combinedPrefix) {
		// A rewrite of a combined Event (a ReplicaSet creating more than ten Pods): its name
		// holds its first occurrence's time, another Pod's. The Pod's own watch time dates it.
		return true
	}
	key := objectName{e.Namespace, name}
	if ps := c.pods[c.byName[key]]; ps != nil {
		ps.createdEvent = e
		return true
	}
	if len(c.createdBy) >= maxPendingEvents {
		c.stats.Dropped("pending_events_cap")
		return true
	}
	c.createdBy[key] = e
	return true
}
