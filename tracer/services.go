package tracer

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/watch"
)

// Services (core/v1): which Services select a Pod, so that its trace waits for their
// EndpointSlices.
const (
	ResourceServices watch.Resource = "services"
	StreamServices   watch.Stream   = "services"
)

// serviceKind is the registry entry of Services.
var serviceKind = &kind{
	Kind: &watch.Kind{
		Resource: ResourceServices, Stream: StreamServices, Kind: "Service",
		GVR:       corev1.SchemeGroupVersion.WithResource("services"),
		NewObject: func() runtime.Object { return &corev1.Service{} },
		NewList:   func() runtime.Object { return &corev1.ServiceList{} },
		ListWatch: watch.Namespaced(func(c kubernetes.Interface, ns string) watch.Lister[*corev1.ServiceList] {
			return c.CoreV1().Services(ns)
		}),
		KeepsIdentity: true,
		Snapshot:      watch.SnapshotServices, Verbs: watch.ReadVerbs,
	},
	handle: func(c *Correlator, d watch.Delta) { c.handleService(&d, d.Object.(*corev1.Service)) },
}

func (c *Correlator) handleService(d *watch.Delta, s *corev1.Service) {
	inNamespace := c.services[s.Namespace]
	if d.Type == watch.Deleted || len(s.Spec.Selector) == 0 {
		if _, ok := inNamespace[s.Name]; ok {
			delete(inNamespace, s.Name)
			if len(inNamespace) == 0 {
				delete(c.services, s.Namespace)
			}
			c.servicesChanged++
			c.servicesDirty = true
		}
		return
	}
	if inNamespace == nil {
		inNamespace = map[string]labels.Selector{}
		c.services[s.Namespace] = inNamespace
	}
	inNamespace[s.Name] = labels.SelectorFromSet(s.Spec.Selector)
	c.servicesChanged++
	c.servicesDirty = true
}
