package tracer

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/readyspan/readyspan/internal/conventions"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// TestKindsAgreeWithTheScheme holds each entry of the registry to client-go's scheme: its empty
// object and list are of the group, version and watch.Kind it names, and the names it is looked up by
// are its own.
func TestKindsAgreeWithTheScheme(t *testing.T) {
	streams := map[watch.Stream]bool{}
	for _, k := range Kinds.Kinds() {
		t.Run(string(k.Stream), func(t *testing.T) {
			if streams[k.Stream] {
				t.Errorf("stream %s named twice", k.Stream)
			}
			streams[k.Stream] = true
			if k.JSONOnly {
				// A custom resource: client-go's scheme does not know it, and must not
				// (its group is not a built-in one); its objects are decoded by
				// encoding/json, held to real ones by watch's TestWatchEncodingOnTheWire.
				if scheme.Scheme.IsGroupRegistered(k.GVR.Group) {
					t.Errorf("JSONOnly, but %s is a built-in group", k.GVR.Group)
				}
				if !k.Optional {
					t.Error("a custom resource not Optional: a cluster without its CRD would never sync")
				}
			} else {
				checkScheme(t, k)
			}
			if got, err := Kinds.Of(k.Stream); err != nil || got != k {
				t.Errorf("Kinds.Of(%s): %v, %v", k.Stream, got, err)
			}
			if got, ok := Kinds.OfObject(k.NewObject()); !ok || got != k {
				t.Errorf("Kinds.OfObject(%T): %v", k.NewObject(), got)
			}
			if s, ok := Kinds.StreamFor(k.NewObject()); !ok || s != k.Stream {
				t.Errorf("Kinds.StreamFor(%T) = %s, want %s", k.NewObject(), s, k.Stream)
			}
			if len(k.Verbs) == 0 {
				t.Error("no RBAC verbs")
			}
		})
	}
}

// checkScheme holds a built-in kind's objects and lists to client-go's scheme.
func checkScheme(t *testing.T, k *watch.Kind) {
	t.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(k.NewObject())
	if err != nil || len(gvks) != 1 {
		t.Fatalf("%T: kinds %v, %v", k.NewObject(), gvks, err)
	}
	if got := gvks[0]; got.GroupVersion() != k.GVR.GroupVersion() || got.Kind != k.Kind {
		t.Errorf("the object is a %v, the entry says %v %s", got, k.GVR.GroupVersion(), k.Kind)
	}
	lists, _, err := scheme.Scheme.ObjectKinds(k.NewList())
	if err != nil || len(lists) != 1 || lists[0] != gvks[0].GroupVersion().WithKind(k.Kind+"List") {
		t.Errorf("the list is a %v (%v), want a %sList", lists, err, k.Kind)
	}
}

// TestSnapshotOrder pins the order a recording's streams are read in: owners and Services before
// Pods, Events before Pods (replays of recordings depend on it). Each stream of the registry is
// read once; a kind added later may come anywhere its rank puts it.
func TestSnapshotOrder(t *testing.T) {
	want := []watch.Stream{StreamDeployments, StreamStatefulSets, StreamDaemonSets, StreamRevisions, StreamReplicaSets, StreamServices, StreamEventsCore, StreamEventsV1, StreamEndpointSlices, StreamPods}
	pinned := slices.DeleteFunc(slices.Clone(Kinds.SnapshotOrder()), func(s watch.Stream) bool { return !slices.Contains(want, s) })
	if !slices.Equal(pinned, want) {
		t.Errorf("snapshot order %v, want %v in that order", Kinds.SnapshotOrder(), want)
	}
	if len(Kinds.SnapshotOrder()) != len(kinds) {
		t.Errorf("%d streams in the snapshot order, %d kinds", len(Kinds.SnapshotOrder()), len(kinds))
	}
	if last := Kinds.SnapshotOrder()[len(Kinds.SnapshotOrder())-1]; last != StreamPods {
		t.Errorf("the last stream read is %s, want pods", last)
	}
}

// TestAuditedWrites pins which audit events the registry makes relevant: a workload's change
// or scale, a bare Pod's creation, and nothing else.
func TestAuditedWrites(t *testing.T) {
	for _, tc := range []struct {
		group, resource, sub, verb string
		want                       bool
	}{
		{"", "pods", "", "create", true},
		{"", "pods", "", "update", false},
		{"", "pods", "status", "create", false},
		{"", "pods", "binding", "create", false},
		{"apps", "pods", "", "create", false},
		{"apps", "deployments", "", "patch", true},
		{"apps", "deployments", "", "create", true},
		{"apps", "deployments", "", "update", true},
		{"apps", "deployments", "", "delete", false},
		{"apps", "deployments", "scale", "update", true},
		{"apps", "deployments", "status", "update", false},
		{"apps", "statefulsets", "scale", "patch", true},
		{"apps", "daemonsets", "", "update", true},
		{"apps", "replicasets", "", "create", false},
		{"apps", "controllerrevisions", "", "create", false},
		{"", "events", "", "create", false},
		{"events.k8s.io", "events", "", "create", false},
		{"", "deployments", "", "create", false},
	} {
		line := fmt.Sprintf(`{"stage":"ResponseComplete","verb":%q,"objectRef":{"resource":%q,"namespace":"ns","name":"x","apiGroup":%q,"subresource":%q},`+
			`"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-01-02T03:04:05.000001Z","stageTimestamp":"2026-01-02T03:04:05.000002Z"}`,
			tc.verb, tc.resource, tc.group, tc.sub)
		a, err := Kinds.ParseAuditLine([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if got := a != nil; got != tc.want {
			t.Errorf("%s %s/%s/%s: relevant %v, want %v", tc.verb, tc.group, tc.resource, tc.sub, got, tc.want)
		}
	}
}

// kindOfObject's type switch and the registry's map give every entry's objects the same entry.
func TestKindOfObject(t *testing.T) {
	for _, k := range kinds {
		got, ok := kindOfObject(k.NewObject())
		if w, _ := Kinds.OfObject(k.NewObject()); !ok || got != k || w != k.Kind {
			t.Errorf("%s: kindOfObject gives %v", k.Stream, got)
		}
	}
	if _, ok := kindOfObject(&corev1.ConfigMap{}); ok {
		t.Error("a ConfigMap has an entry")
	}
}

// TestKindsEncoding holds the registry to what it says of each kind's encoding: a kind read in
// protobuf must be one the protobuf serializer encodes (a custom resource added without jsonOnly
// fails here), and no kind asked for JSON is read in anything else.
func TestKindsEncoding(t *testing.T) {
	pb := protobufInfo(t)
	for _, k := range Kinds.Kinds() {
		t.Run(string(k.Stream), func(t *testing.T) {
			if got := k.Encoding(watch.EncodingJSON); got != watch.EncodingJSON {
				t.Errorf("asked for JSON, %s is read in %s", k.Stream, got)
			}
			want := watch.EncodingProtobuf
			if k.JSONOnly {
				want = watch.EncodingJSON
			}
			if got := k.Encoding(watch.EncodingProtobuf); got != want {
				t.Errorf("asked for protobuf, %s is read in %s, want %s", k.Stream, got, want)
			}
			if got := k.Encoding(""); got != want {
				t.Errorf("asked for the default, %s is read in %s, want %s", k.Stream, got, want)
			}
			if k.JSONOnly {
				return
			}
			enc := scheme.Codecs.EncoderForVersion(pb.Serializer, k.GVR.GroupVersion())
			for _, o := range []runtime.Object{k.NewObject(), k.NewList()} {
				if _, err := runtime.Encode(enc, o); err != nil {
					t.Errorf("%s is read in protobuf, but %T has no protobuf encoding: %v (mark it jsonOnly)", k.Stream, o, err)
				}
			}
		})
	}
}

func protobufInfo(t *testing.T) runtime.SerializerInfo {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer in client-go's scheme")
	}
	return info
}

// TestChainKindsDeclared: every kind that can stand in a Pod's chain of controllers (a workload,
// a kind with a root, the ReplicaSet) has its step declared in phases/conventions.yaml as a
// span of the controllers phase, and its name attribute as an attribute key: phases draws them
// from the kind's name (ControllerStep, ControllerAttr), so a kind added to the registry without
// them would send spans and attributes that the catalogue, the docs and the UI do not know.
func TestChainKindsDeclared(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "phases", "conventions.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := conventions.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]bool{}
	for _, a := range f.Attributes {
		attrs[a.Key] = true
	}
	n := 0
	for _, k := range kinds {
		if !k.Workload && k.root == nil && k != replicaSetKind {
			continue
		}
		n++
		step := phases.ControllerStep(k.Kind.Kind)
		if info, ok := phases.Catalogued(step); !ok || info.Phase != phases.PhaseControllers {
			t.Errorf("%s: step %s not a catalogued span of the controllers phase (%+v, %v)", k.Kind.Kind, step, info, ok)
		}
		if a := phases.ControllerAttr(k.Kind.Kind); !attrs[a] {
			t.Errorf("%s: attribute %s not declared", k.Kind.Kind, a)
		}
	}
	if n < 6 {
		t.Errorf("%d kinds in chains, want at least the 6 built in", n)
	}
}
