package tracer

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/watch"
)

// The fuzz targets here cover every reader of input readyspan does not control but recordings
// (package watch fuzzes those): the apiserver's audit log, and the messages of the Events that
// kubelets, schedulers and controllers write. Each must return an error or a counted skip, never
// panic, and never keep more than it was given. Seeds are in testdata/fuzz/<target>.

// FuzzParseAuditLine feeds arbitrary bytes as one audit log line.
func FuzzParseAuditLine(f *testing.F) {
	f.Add([]byte(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","verb":"patch","userAgent":"kubectl/v1.37.2 (linux/amd64)","objectRef":{"resource":"deployments","namespace":"d","name":"web","apiGroup":"apps"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-01-02T03:04:05.000001Z","stageTimestamp":"2026-01-02T03:04:05.020002Z"}`))
	f.Add([]byte(`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"pods","namespace":"d","name":"p"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-01-02T03:04:05Z","stageTimestamp":"2026-01-02T03:04:04Z"}`))
	f.Add([]byte(`{"stage":"ResponseComplete","verb":"create","objectRef":{"resource":"pods","name":"p"},"responseStatus":{"code":201},"requestReceivedTimestamp":"2026-01-02T03:04:0`))
	f.Add([]byte(`{"stage":"ResponseComplete","objectRef":null,"responseStatus":{"code":"x"}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		a, err := Kinds.ParseAuditLine(line)
		if err != nil {
			if a != nil {
				t.Fatalf("entry and error both returned")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if a == nil {
			return
		}
		if a.ObjectRef == nil || Kinds.OfResource(watch.Resource(a.ObjectRef.Resource)) == nil || a.RequestReceived.IsZero() || a.StageTimestamp.Before(a.RequestReceived) {
			t.Fatalf("accepted an entry readyspan cannot use: %+v", a)
		}
		c := New(Config{}, SinkFunc(func(*phases.Trace) {}), nil, nil)
		for range maxAuditPerKey + 2 {
			c.Handle(watch.Delta{Resource: watch.ResourceAudit, Type: watch.Added, Audit: a})
		}
		if n := len(c.audit[a.Key()]); n > maxAuditPerKey {
			t.Fatalf("%d audit entries kept for one object, bound %d", n, maxAuditPerKey)
		}
	})
}

// FuzzStepOf feeds arbitrary workload Events to the rollout step parser.
func FuzzStepOf(f *testing.F) {
	f.Add("Deployment", "ScalingReplicaSet", "Scaled up replica set web-6d4f8c7b9 from 0 to 3")
	f.Add("Deployment", "ScalingReplicaSet", "Scaled down replica set web-5c8d7f6a4 from 3 to 2")
	f.Add("Deployment", "ScalingReplicaSet", "Scaled up replica set web from -1 to 3")
	f.Add("StatefulSet", "SuccessfulCreate", "create Pod db-0 in StatefulSet db successful")
	f.Add("StatefulSet", "SuccessfulDelete", "delete Pod db-2 in StatefulSet db successful")
	f.Add("DaemonSet", "SuccessfulCreate", "Created pod: agent-x7k2p")
	f.Add("DaemonSet", "SuccessfulDelete", "Deleted pod: ")
	f.Fuzz(func(t *testing.T, kind, reason, msg string) {
		e := &events.Event{Regarding: events.Ref{Kind: kind}, Reason: reason, Message: msg}
		st, ok, known := stepOf(e)
		if !ok || !known {
			return
		}
		if st.Target == "" {
			t.Fatalf("a known step without a target from %q", msg)
		}
		if kind == "Deployment" && (st.From < 0 || st.To < 0) {
			t.Fatalf("negative replicas from %q: %d → %d", msg, st.From, st.To)
		}
	})
}

// FuzzEventMessages feeds arbitrary Events, about a Pod, a ReplicaSet, a Deployment, a
// StatefulSet or a DaemonSet, through the correlator, where every message parser reads them.
// Unknown formats are counted and logged once per shape.
func FuzzEventMessages(f *testing.F) {
	for _, s := range [][3]string{
		{"Pod", "Pulled", `Successfully pulled image "busybox" in 1.2s (1.3s including waiting). Image size: 100 bytes.`},
		{"Pod", "Pulling", `Pulling image "busybox"`},
		{"Pod", "Failed", `Failed to pull image "nope": not found`},
		{"Pod", "Unhealthy", `Readiness probe failed: HTTP probe failed with statuscode: 503`},
		{"ReplicaSet", "SuccessfulCreate", "Created pod: web-abc12"},
		{"Deployment", "ScalingReplicaSet", "Scaled up replica set web-6d4f8c7b9 from 0 to 3"},
		{"StatefulSet", "SuccessfulCreate", "create Pod db-0 in StatefulSet db successful"},
		{"DaemonSet", "SuccessfulDelete", "Deleted pod: agent-x7k2p"},
		{"Pod", "Preempted", "Preempted by pod 5f0d3c1e-7a2b-4c1d-9e8f-0a1b2c3d4e5f on node node-1"},
		{"Pod", "TriggeredScaleUp", "pod triggered scale-up: [{pool-a 1->2 (max: 5)}]"},
		{"Pod", "Nominated", "Pod should schedule on: nodeclaim/default-x7k2q"},
	} {
		f.Add(s[0], s[1], s[2], "spec.containers{web}")
	}
	f.Fuzz(func(t *testing.T, kind, reason, msg, fieldPath string) {
		stats := &countStats{}
		c := New(Config{}, SinkFunc(func(*phases.Trace) {}), stats, nil)
		t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		for i := range 3 {
			ev := &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "x." + "18ecc609adb8e83a", Namespace: "d", UID: types.UID("e" + string(rune('0'+i))), ResourceVersion: "1"},
				InvolvedObject: corev1.ObjectReference{Kind: kind, Name: "x", Namespace: "d", UID: "u", FieldPath: fieldPath},
				Reason:         reason, Message: msg, Count: 1,
				FirstTimestamp: metav1.NewTime(t0), LastTimestamp: metav1.NewTime(t0),
			}
			c.Handle(watch.Delta{Resource: ResourceEvents, Type: watch.Added, Object: ev, Recv: t0})
		}
		if len(c.unknownShapes) > maxUnknownShapes+1 {
			t.Fatalf("%d unknown shapes remembered", len(c.unknownShapes))
		}
		if shape := events.MessageShape(msg); strings.Count(shape, " ") > 4 {
			t.Fatalf("shape of %q has more than 5 words: %q", msg, shape)
		}
	})
}
