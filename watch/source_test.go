package watch_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// TestSourceDeliversAndReportsAudit: the shared Source answers Reachable on a working
// apiserver, delivers a created Pod's delta, and tells the command when the audit log cannot be
// read.
func TestSourceDeliversAndReportsAudit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	client := fake.NewClientset()
	auditErr := make(chan error, 1)
	p := watch.NewSource(watch.SourceConfig{
		Client: client, Kinds: tracer.Kinds, Host: "fake",
		Watch:       watch.Config{Namespaces: []string{"default"}},
		AuditLog:    filepath.Join(t.TempDir(), "missing.jsonl"),
		AuditFailed: func(err error) { auditErr <- err },
	})
	if err := p.Reachable(ctx); err != nil {
		t.Fatal(err)
	}
	p.Start(ctx)
	if err := p.Watcher().WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for seen := false; !seen; {
		select {
		case d := <-p.Deltas():
			p, ok := d.Object.(*corev1.Pod)
			seen = ok && p.Name == "web"
		case <-ctx.Done():
			t.Fatal("the created Pod was never delivered")
		}
	}
	select {
	case err := <-auditErr:
		if err == nil {
			t.Fatal("audit failure reported without an error")
		}
	case <-ctx.Done():
		t.Fatal("a missing audit log was not reported")
	}
}

// StartFor bounds the run by --for when it is set, and leaves it unbounded when it is not.
func TestSourceStartFor(t *testing.T) {
	for _, tt := range []struct {
		name     string
		duration time.Duration
		bounded  bool
	}{
		{"no --for", 0, false},
		{"--for 30s", 30 * time.Second, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := watch.NewSource(watch.SourceConfig{Kinds: tracer.Kinds, Client: fake.NewClientset(), Host: "fake", Watch: watch.Config{Namespaces: []string{"default"}}})
			run, stop, err := p.StartFor(ctx, tt.duration)
			if err != nil {
				t.Fatal(err)
			}
			defer stop()
			deadline, bounded := run.Deadline()
			if bounded != tt.bounded || (bounded && time.Until(deadline) > tt.duration) {
				t.Errorf("deadline %v (bounded %v), want bounded=%v within %v", deadline, bounded, tt.bounded, tt.duration)
			}
			if err := p.Watcher().WaitForSync(run); err != nil {
				t.Fatalf("StartFor did not start the informers: %v", err)
			}
		})
	}
}
