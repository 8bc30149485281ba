package phases

import "time"

// The kinds of admission webhook (AdmissionCall.Type).
const (
	WebhookMutating   = "mutating"
	WebhookValidating = "validating"
)

// The kinds of etcd write (StorageWrite.Operation): the apiserver's Create (a new object) and
// GuaranteedUpdate (a read-modify-write of an existing one: the Binding, status writes).
const (
	StorageCreate = "create"
	StorageUpdate = "update"
)

// AdmissionCall is one call of an admission webhook that was joined into a trace: the
// apiserver's own span around it (time source component-span).
type AdmissionCall struct {
	Webhook  string // the webhook's name as the apiserver states it; "" when it does not
	Type     string // WebhookMutating or WebhookValidating
	Duration time.Duration
	Error    bool // the apiserver marked the call failed (a timeout, a refused connection)
}

// StorageWrite is one write to etcd that was joined into a trace.
type StorageWrite struct {
	Operation string // StorageCreate or StorageUpdate
	Duration  time.Duration
}

// storageOps maps the apiserver's storage span names to the operation.
var storageOps = map[string]string{compCreateEtcd: StorageCreate, compUpdateEtcd: StorageUpdate}

// ComponentCalls lists the admission webhook calls and etcd writes among the components' spans
// joined into the trace (Join), in the trace's order. A trace without joined spans has none.
func (t *Trace) ComponentCalls() (hooks []AdmissionCall, writes []StorageWrite) {
	for i := range t.Spans {
		s := &t.Spans[i]
		if s.StartBound.Source != SourceComponentSpan {
			continue
		}
		switch s.Name {
		case SpanAPIMutatingHook, SpanAPIValidatingHook:
			typ := WebhookMutating
			if s.Name == SpanAPIValidatingHook {
				typ = WebhookValidating
			}
			name, _ := s.Attr(AttrComponentWebhook).(string)
			hooks = append(hooks, AdmissionCall{Webhook: name, Type: typ, Duration: s.Duration(), Error: s.Status == StatusError})
		case SpanAPIStorage:
			orig, _ := s.Attr(AttrComponentSpanName).(string)
			if op := storageOps[orig]; op != "" {
				writes = append(writes, StorageWrite{Operation: op, Duration: s.Duration()})
			}
		}
	}
	return hooks, writes
}
