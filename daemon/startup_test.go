package daemon

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/exporters/otlp"
	"github.com/readyspan/readyspan/otlpin"
)

// A daemon that cannot start its OTLP input says what failed, in one error, and leaves nothing
// running: a port in use, a certificate that is missing or bad, an open address without
// --otlp-receive-insecure on a client that cannot check tokens.
func TestNewFailsCleanly(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		receive otlpin.Config
		want    string
	}{
		{"port in use", otlpin.Config{Addr: taken.Addr().String()}, "address already in use"},
		{"missing certificate", otlpin.Config{Addr: "localhost:0", CertFile: "/nonexistent/tls.crt", KeyFile: "/nonexistent/tls.key"}, "--otlp-receive-tls-cert-file: open /nonexistent/tls.crt"},
		{"bad certificate where senders authenticate", otlpin.Config{Addr: "0.0.0.0:0", CertFile: bad, KeyFile: bad}, "load the TLS certificate " + bad},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{MetricsAddr: "127.0.0.1:0", OTLP: otlp.Config{Endpoint: "127.0.0.1:1", Insecure: true, QueueTraces: 1, QueueBytes: 1},
				Receive: ReceiveOptions{Config: tc.receive, Wait: time.Second}}
			d, err := New(context.Background(), o, fake.NewClientset(), "https://127.0.0.1:1", nil)
			if d != nil || err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("New: %v, %v; want one line containing %q", d, err, tc.want)
			}
		})
	}
}
