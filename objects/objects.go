// Package objects reads what readyspan needs of Kubernetes objects' metadata and status, for
// both of its consumers of the same changes (the Pod correlator and the rollout tracker): an
// object's controller, which client (not a controller) changed or created it and when, and a
// Pod's conditions.
package objects

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"time"
)

// ControllerManager is the field manager of everything kube-controller-manager writes; any
// other manager is a client.
const ControllerManager = "kube-controller-manager"

// ControllerOf is the owner reference marked as the object's controller, or nil.
func ControllerOf(m *metav1.ObjectMeta) *metav1.OwnerReference {
	for i := range m.OwnerReferences {
		if r := &m.OwnerReferences[i]; r.Controller != nil && *r.Controller {
			return r
		}
	}
	return nil
}

// controllerManagers are the field managers of the workload controllers, whose writes are never
// a client's change: kube-controller-manager, and each controller that runs apart
// (RegisterManager).
var controllerManagers = map[string]bool{ControllerManager: true}

// RegisterManager names the field manager of a workload controller that runs apart from
// kube-controller-manager, so its writes are not taken for a client's. It is called only from
// package initialisation: the set is read without a lock.
func RegisterManager(manager string) { controllerManagers[manager] = true }

// ClientChange returns the newest managedFields entry of a client (not a controller)
// on the main resource: who last changed the spec, and when (1 s, apiserver clock).
func ClientChange(m *metav1.ObjectMeta) (string, time.Time) { return ClientEntry(m, true) }

// ClientEntry returns the newest (or the oldest) managedFields entry of a client on the main
// resource, with its time.
func ClientEntry(m *metav1.ObjectMeta, newest bool) (string, time.Time) {
	var who string
	var at time.Time
	for i := range m.ManagedFields {
		f := &m.ManagedFields[i]
		if f.Subresource != "" || controllerManagers[f.Manager] || f.Time == nil {
			continue
		}
		if who == "" || newest && f.Time.After(at) || !newest && f.Time.Time.Before(at) {
			who, at = f.Manager, f.Time.Time
		}
	}
	return who, at
}

// Creator is the field manager that created the object: the oldest entry of a client (not the
// controller manager) on the main resource.
func Creator(m *metav1.ObjectMeta) string {
	who, _ := ClientEntry(m, false)
	return who
}

// Condition is the Pod's condition of type t, or nil.
func Condition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// IsReady reports whether the Pod's Ready condition is True.
func IsReady(p *corev1.Pod) bool { return ConditionTrue(p, corev1.PodReady) }

// ConditionTrue reports whether the Pod's condition of type t is True.
func ConditionTrue(p *corev1.Pod, t corev1.PodConditionType) bool {
	c := Condition(p, t)
	return c != nil && c.Status == corev1.ConditionTrue
}

// NodeReady reports whether the Node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for i := range n.Status.Conditions {
		if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PreStop says whether a container of the Pod has a preStop hook, the longest sleep such a
// hook declares, and whether one is an exec, httpGet or tcpSocket hook (whose end no watch
// shows).
func PreStop(p *corev1.Pod) (has bool, sleep time.Duration, other bool) {
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
			continue
		}
		has = true
		h := c.Lifecycle.PreStop
		if h.Sleep != nil && h.Sleep.Seconds > 0 {
			sleep = max(sleep, time.Duration(min(h.Sleep.Seconds, 1<<31))*time.Second)
		}
		if h.Exec != nil || h.HTTPGet != nil || h.TCPSocket != nil {
			other = true
		}
	}
	return has, sleep, other
}

// PodAddresses are the Pod's IPs (status.podIPs, else status.podIP), as kube-proxy's rules
// name its endpoints.
func PodAddresses(p *corev1.Pod) []string {
	var out []string
	for _, ip := range p.Status.PodIPs {
		if ip.IP != "" {
			out = append(out, ip.IP)
		}
	}
	if len(out) == 0 && p.Status.PodIP != "" {
		out = append(out, p.Status.PodIP)
	}
	return out
}
