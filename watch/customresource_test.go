package watch

import (
	"errors"
	"io"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	apiwatch "k8s.io/apimachinery/pkg/watch"
)

// TestCustomResourceEvents: a custom resource's watch stream as the apiserver writes it (one JSON
// WatchEvent a line) decodes into the kind's type, an ERROR event into the Status the reflector
// reads; an unknown event type and a line longer than any object the apiserver stores are
// errors that say what they are, the hostile type escaped and cut.
func TestCustomResourceEvents(t *testing.T) {
	newObj := func() runtime.Object { return &metav1.PartialObjectMetadata{} }
	decode := func(stream string) (apiwatch.EventType, runtime.Object, error) {
		d := newEventDecoder(io.NopCloser(strings.NewReader(stream)), "rollouts", newObj)
		defer d.Close()
		return d.Decode()
	}
	typ, obj, err := decode(`{"type":"ADDED","object":{"apiVersion":"argoproj.io/v1alpha1","kind":"Rollout","metadata":{"name":"web","resourceVersion":"7"}}}` + "\n")
	if m, ok := obj.(*metav1.PartialObjectMetadata); err != nil || typ != apiwatch.Added || !ok || m.Name != "web" || m.ResourceVersion != "7" {
		t.Errorf("ADDED: %s %#v %v", typ, obj, err)
	}
	typ, obj, err = decode(`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Expired","code":410}}` + "\n")
	if s, ok := obj.(*metav1.Status); err != nil || typ != apiwatch.Error || !ok || s.Code != 410 || s.Reason != metav1.StatusReasonExpired {
		t.Errorf("ERROR: %s %#v %v", typ, obj, err)
	}
	_, _, err = decode(`{"type":"SURPRISE\u001b[31m` + strings.Repeat("x", 100) + `","object":{}}` + "\n")
	if err == nil || !strings.Contains(err.Error(), `unknown event type "SURPRISE`) || strings.ContainsRune(err.Error(), 0x1b) || len(err.Error()) > 200 {
		t.Errorf("unknown type: %v", err)
	}
	_, _, err = decode(`{"type":"ADDED","object":{"metadata":{"name":"` + strings.Repeat("x", maxCustomEvent) + `"}}}` + "\n")
	if !errors.Is(err, errEventTooLong) {
		t.Errorf("a line over %d bytes: %v, want %v", maxCustomEvent, err, errEventTooLong)
	}
}
