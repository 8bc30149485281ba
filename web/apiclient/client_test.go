package apiclient

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClient: the token file's token is sent as a bearer token; a token or CA file that holds
// none is refused before any request; an answer over the limit, a 404 of one trace and another
// status are each told apart.
func TestClient(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		switch r.URL.Path {
		case "/api/v1/pods/gone":
			http.NotFound(w, r)
		case "/api/v1/pods":
			_, _ = w.Write([]byte(`[{"uid":"u","n":12345678901234567890}]`))
		default:
			http.Error(w, "Forbidden: wrong token", http.StatusForbidden)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, err := New(Config{URL: srv.URL, TokenFile: write("token", "s3cret\n")})
	if err != nil {
		t.Fatal(err)
	}
	var list []map[string]any
	if err := c.Get(context.Background(), "api/v1/pods", nil, 1<<10, &list); err != nil || auth != "Bearer s3cret" || len(list) != 1 {
		t.Fatalf("%v, sent %q, read %v", err, auth, list)
	}
	if err := c.Get(context.Background(), "api/v1/pods", nil, 10, &list); err == nil || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Errorf("an answer over the limit: %v", err)
	}
	if err := c.Get(context.Background(), "api/v1/pods/gone", nil, 1<<10, &list); !errors.Is(err, ErrNotHeld) {
		t.Errorf("a Pod not held: %v", err)
	}
	if err := c.Get(context.Background(), "api/v1/rollouts", nil, 1<<10, &list); err == nil || !strings.Contains(err.Error(), "403 Forbidden: Forbidden: wrong token") {
		t.Errorf("a refusal: %v", err)
	}
	for _, cfg := range []Config{
		{URL: srv.URL, TokenFile: write("empty", " \n")},
		{URL: srv.URL, TokenFile: filepath.Join(dir, "none")},
		{URL: srv.URL, CAFile: write("ca", "not a certificate")},
		{URL: "http://user:pw@host"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
	for _, id := range []string{"", "../metrics", "a?b", strings.Repeat("a", 65)} {
		if CheckID(id) == nil {
			t.Errorf("ID %q accepted", id)
		}
	}
}
