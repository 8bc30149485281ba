package tracer

import (
	"time"

	"github.com/readyspan/readyspan/objects"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// maxAuditPerKey bounds the writes remembered per object.
const maxAuditPerKey = 8

func (c *Correlator) handleAudit(a *watch.AuditEntry) {
	k := a.Key()
	list := append(c.audit[k], a)
	if len(list) > maxAuditPerKey {
		list = list[len(list)-maxAuditPerKey:]
	}
	c.audit[k] = list
}

// auditFor returns the last client write of an object received no later than before, a
// whole-second stamp (a creationTimestamp, an Event's lastTimestamp) or a receive time, plus its
// second. The receipt is what bounds it: the apiserver stamps the object while it handles the
// request, so a write stamped at 12:00:58.995 whose answer left at 12:00:59.020 is still the
// write of an object created "12:00:58".
func (c *Correlator) auditFor(resource, namespace, name string, before time.Time) *watch.AuditEntry {
	if len(c.audit) == 0 {
		return nil // no audit log read: no key to build, for every Pod traced
	}
	list := c.audit[watch.AuditKey(resource, namespace, name)]
	for i := len(list) - 1; i >= 0; i-- {
		a := list[i]
		if a.Client() == objects.ControllerManager {
			continue
		}
		if before.IsZero() || !a.RequestReceived.After(before.Add(time.Second)) {
			return a
		}
	}
	return nil
}

func applyAudit(obs *phases.Pod, a *watch.AuditEntry) {
	if a == nil {
		return
	}
	obs.AuditReceived.Add(a.RequestReceived, phases.SourceAudit)
	obs.AuditPersisted.Add(a.StageTimestamp, phases.SourceAudit)
	if obs.Client == "" || obs.Client == "kubectl-client-side-apply" || obs.Client == "kubectl-create" {
		obs.Client = a.Client()
	}
}
