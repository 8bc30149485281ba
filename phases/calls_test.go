package phases

import (
	"testing"
	"time"
)

// ComponentCalls lists the joined webhook calls, by webhook and type, and the joined etcd
// writes, by operation, with the apiserver's own lengths; spans drawn from the API are not
// calls, and a request that was not joined contributes nothing.
func TestComponentCalls(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tr := joinTrace(t0)
	if hooks, writes := tr.ComponentCalls(); len(hooks) != 0 || len(writes) != 0 {
		t.Fatalf("before the join: %v, %v; want none", hooks, writes)
	}
	create := ComponentTrace{
		cs(ServiceAPIServer, 1, 1, 0, "POST /api/v1/namespaces/{:namespace}/pods", at(1000), at(1200)),
		cs(ServiceAPIServer, 1, 2, 1, "Create", at(1001), at(1190), "resource", "pods", "verb", "POST", "subresource", ""),
		cs(ServiceAPIServer, 1, 3, 2, "Call mutating webhook", at(1010), at(1062), "webhook", "inject.example.com", "UID", "a1"),
		cs(ServiceAPIServer, 1, 4, 2, "Call validating webhook", at(1070), at(1091), "webhook", "policy.example.com", "UID", "a2"),
		cs(ServiceAPIServer, 1, 5, 2, "Create etcd3", at(1100), at(1104), "key", "/pods/ns/p"),
	}
	status := ComponentTrace{
		cs(ServiceAPIServer, 2, 1, 0, "PATCH /api/v1/namespaces/{:namespace}/pods/{:name}/status", at(5000), at(5010)),
		cs(ServiceAPIServer, 2, 2, 1, "Patch", at(5001), at(5009), "resource", "pods", "verb", "PATCH", "subresource", "status"),
		cs(ServiceAPIServer, 2, 3, 2, "GuaranteedUpdate etcd3", at(5002), at(5008), "key", "/pods/ns/p"),
	}
	other := ComponentTrace{ // a request on another resource: not joined
		cs(ServiceAPIServer, 3, 1, 0, "POST /api/v1/namespaces/{:namespace}/configmaps", at(1000), at(1100)),
		cs(ServiceAPIServer, 3, 2, 1, "Create", at(1001), at(1090), "resource", "configmaps", "verb", "POST"),
		cs(ServiceAPIServer, 3, 3, 2, "Call mutating webhook", at(1010), at(1080), "webhook", "other.example.com"),
	}
	tr.Join([]ComponentTrace{create, status, other})
	hooks, writes := tr.ComponentCalls()
	wantHooks := []AdmissionCall{
		{Webhook: "inject.example.com", Type: WebhookMutating, Duration: 52 * time.Millisecond},
		{Webhook: "policy.example.com", Type: WebhookValidating, Duration: 21 * time.Millisecond},
	}
	wantWrites := []StorageWrite{{StorageCreate, 4 * time.Millisecond}, {StorageUpdate, 6 * time.Millisecond}}
	if len(hooks) != len(wantHooks) {
		t.Fatalf("hooks %+v, want %+v", hooks, wantHooks)
	}
	for i := range hooks {
		if hooks[i] != wantHooks[i] {
			t.Errorf("hook %d: %+v, want %+v", i, hooks[i], wantHooks[i])
		}
	}
	if len(writes) != len(wantWrites) || writes[0] != wantWrites[0] || writes[1] != wantWrites[1] {
		t.Errorf("writes %+v, want %+v", writes, wantWrites)
	}
}
