package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// --watch-encoding decides what the clients of run, watch and record ask the apiserver for:
// protobuf (JSON accepted) unless told otherwise; a value it does not know is refused.
func TestWatchEncodingFlag(t *testing.T) {
	var mu sync.Mutex
	var accepts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accepts = append(accepts, r.Header.Get("Accept"))
		mu.Unlock()
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "config")
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"" + srv.URL + "\"}\n" +
		"contexts:\n- name: c\n  context: {cluster: c, namespace: web}\ncurrent-context: c\n"
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	const protobuf, json = "application/vnd.kubernetes.protobuf,application/json", "application/json"
	for _, tc := range []struct {
		name       string
		args       []string
		main, json string // the Accept of each client; "" for an error
		err        string
	}{
		{name: "default", main: protobuf, json: json},
		{name: "protobuf", args: []string{"--watch-encoding", "protobuf"}, main: protobuf, json: json},
		{name: "json", args: []string{"--watch-encoding", "json"}, main: json, json: json},
		{name: "unknown", args: []string{"--watch-encoding", "yaml"}, err: `--watch-encoding: unknown watch encoding "yaml": want protobuf or json`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []string{"kubectl", "daemon"} {
				var client, jsonClient kubernetes.Interface
				var err error
				fs := newFlagSet("watch", "", io.Discard)
				args := append([]string{"--kubeconfig", path}, tc.args...)
				if cmd == "kubectl" {
					var kf kubectlFlags
					kf.register(fs, true)
					if err := fs.Parse(args); err != nil {
						t.Fatal(err)
					}
					client, jsonClient, _, err = kf.client()
				} else {
					var cf daemonFlags
					cf.register(fs)
					if err := fs.Parse(args); err != nil {
						t.Fatal(err)
					}
					enc, verr := cf.encoding.value()
					if err = verr; err == nil {
						client, jsonClient, _, err = cf.client(enc)
					}
				}
				if tc.err != "" {
					if err == nil || !strings.Contains(err.Error(), tc.err) {
						t.Errorf("%s: %v, want %q", cmd, err, tc.err)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				accepts = nil
				mu.Unlock()
				_, _ = client.CoreV1().Pods("web").List(context.Background(), metav1.ListOptions{})
				_, _ = jsonClient.AppsV1().Deployments("web").List(context.Background(), metav1.ListOptions{})
				mu.Lock()
				got := append([]string(nil), accepts...)
				mu.Unlock()
				if len(got) != 2 || got[0] != tc.main || got[1] != tc.json {
					t.Errorf("%s: clients asked for %q, want %q then %q", cmd, got, tc.main, tc.json)
				}
			}
		})
	}
}
