package watch

import (
	"io"
	"maps"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
)

// What the tests of package watch_test, which read the registry of package tracer (the kinds
// readyspan reads), need of this package's insides.

// ReadWatch and ReadList are the readers of one recorded stream.
func ReadWatch(r *Registry, in io.Reader, s Stream, path string) ([]Delta, []Problem) {
	w := r.readWatch(in, s, path)
	return w.deltas, w.problems
}

func ReadList(r *Registry, b []byte, s Stream, path string) ([]Delta, []Problem, error) {
	return r.readList(b, s, path)
}

// The content types the clients ask for and the bounds of a recording's lines and messages.
const (
	AcceptProtobuf      = acceptProtobuf
	ContentTypeProtobuf = contentTypeProtobuf
	ContentTypeJSON     = contentTypeJSON
	MaxQuoted           = maxQuoted
)

// SetMaxLineBytes bounds a recording's lines for one test.
func SetMaxLineBytes(t *testing.T, n int) {
	old := maxLineBytes
	maxLineBytes = n
	t.Cleanup(func() { maxLineBytes = old })
}

// SetOutageGrace shortens the outage grace for one test; OutageGrace reads it.
func SetOutageGrace(t *testing.T, d time.Duration) {
	old := outageGrace
	outageGrace = d
	t.Cleanup(func() { outageGrace = old })
}

func OutageGrace() time.Duration { return outageGrace }

// Reflector is what a test sees of one of the Watcher's reflectors.
type Reflector struct {
	Resource Resource
	Example  runtime.Object // an object of the kind it lists and watches
	Known    []string       // the keys of the identities it keeps
}

func (w *Watcher) Reflectors() []Reflector {
	var out []Reflector
	for _, rf := range w.watched {
		out = append(out, Reflector{Resource: rf.resource, Example: rf.example, Known: rf.known.ListKeys()})
	}
	return out
}

// Admit tells whether the Watcher's shard takes an object of a kind seen for the first time.
func (w *Watcher) Admit(k *Kind, obj runtime.Object) bool {
	_, ok := w.admit(k, obj, false)
	return ok
}

// SetSynced marks the Watcher's caches synced, for tests about something else.
func (w *Watcher) SetSynced() {
	w.mu.Lock()
	w.isSynced = true
	w.mu.Unlock()
}

// SetTransform swaps what the informers' queues apply, before Start.
func (w *Watcher) SetTransform(f cache.TransformFunc) { w.transform = f }

// Dir is where the Recorder writes.
func (r *Recorder) Dir() string { return r.dir }

// ClientFor is the client a kind is listed and watched through.
func ClientFor(cfg Config, k *Kind, client kubernetes.Interface) kubernetes.Interface {
	return cfg.clientFor(k, client)
}

// CountErrors counts the Watcher's failures and restarts by resource and reason.
type CountErrors struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *CountErrors) WatchRestart(resource, reason string) {
	c.WatchError(resource, "restart/"+reason)
}

func (c *CountErrors) WatchError(resource, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[resource+"/"+reason]++
}

// Snapshot is the counts so far.
func (c *CountErrors) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// ProtobufInfo is client-go's protobuf serializer.
func ProtobufInfo(t *testing.T) runtime.SerializerInfo {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer in client-go's scheme")
	}
	return info
}

// ForbiddenError is the message of an apiserver's refusal; ErrForbidden one for EndpointSlices.
type ForbiddenError string

func (e ForbiddenError) Error() string { return string(e) }

var ErrForbidden = ForbiddenError("User \"system:serviceaccount:readyspan:readyspan\" cannot list resource \"endpointslices\" in API group \"discovery.k8s.io\" at the cluster scope")

// WaitUntil polls cond for 20 s at most.
func WaitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s in 20s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Process hands one popped batch of a kind's deltas to the Watcher, with known the identities
// its reflector keeps.
func (w *Watcher) Process(k *Kind, known cache.Store, deltas cache.Deltas) error {
	return w.process(k, known, deltas, false)
}

// StripUnread and StripFrame drop what nothing reads from protobuf watch streams.
var (
	StripUnread = stripUnread
	StripFrame  = stripFrame
)

// ProtobufEnvelopes is the protobuf serializer of the clients NewClients makes for protobuf,
// whose decoders read the WatchEvent and Unknown envelopes in place.
func ProtobufEnvelopes() runtime.SerializerInfo {
	info, _ := runtime.SerializerInfoForMediaType(newEnvelopes().SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	return info
}
