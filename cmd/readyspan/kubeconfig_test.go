package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A kubeconfig that points nowhere, or is not a kubeconfig, gives one clear line naming the
// problem, never a stack trace.
func TestKubeconfigPointingNowhere(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	kubeconfig := func(server string) string {
		return `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + server + `", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: d}}]
current-context: x
`
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"closed port", write("closed", kubeconfig("https://127.0.0.1:1")), "127.0.0.1:1"},
		{"unresolvable host", write("nohost", kubeconfig("https://readyspan-no-such-host.invalid:6443")), "readyspan-no-such-host.invalid"},
		{"not a kubeconfig", write("garbage", "\x00\x01 this: is: not: yaml: ["), "garbage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out bytes.Buffer
			err := run(ctx, []string{"explain", "pod/web", "--kubeconfig", tc.path, "--request-timeout", "3s"}, &out, &out)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "goroutine") {
				t.Fatalf("error %q: want one line naming %q", msg, tc.want)
			}
			t.Log(msg)
		})
	}
}
