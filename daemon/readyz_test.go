package daemon

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readyspan/readyspan/exporters/otlp"
)

func TestReadyz(t *testing.T) {
	failing := otlp.Status{Traces: 153, Bytes: 457000, FailingSince: time.Now().Add(-90 * time.Second), LastError: "rpc error: code = Unavailable desc = connection refused"}
	for _, tc := range []struct {
		name     string
		synced   bool
		problem  string
		export   otlp.Status
		wantCode int
		wantBody string
	}{
		{"not synced", false, "", otlp.Status{}, 503, "not ready: caches not synced yet\n"},
		{"forbidden", true, "list pods: forbidden", otlp.Status{}, 503, "not ready: list pods: forbidden\n"},
		{"ready", true, "", otlp.Status{}, 200, "ok\n"},
		// The backend's trouble shows, but readyspan stays ready: a restart would lose the queue.
		{"export failing", true, "", failing, 200, "ok\nexport failing for 1m30s, 153 traces (457000 bytes) queued: rpc error: code = Unavailable desc = connection refused\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ready atomic.Bool
			ready.Store(tc.synced)
			h := readyz(func() string { return tc.problem }, &ready, func() otlp.Status { return tc.export })
			rec := httptest.NewRecorder()
			h(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			if rec.Code != tc.wantCode || rec.Body.String() != tc.wantBody {
				t.Fatalf("got %d %q, want %d %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
		})
	}
}
