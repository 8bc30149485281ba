package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Two clusters and three contexts, as a platform engineer's kubeconfig has them: the current
// context names a namespace, another names a different cluster, user and namespace, the third
// names no namespace at all.
const twoClusterKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: "https://prod.example:6443"}
- name: staging
  cluster: {server: "https://staging.example:6443"}
users:
- name: alice
  user: {token: alice-token}
- name: bob
  user: {token: bob-token}
contexts:
- name: prod-web
  context: {cluster: prod, user: alice, namespace: web}
- name: staging-api
  context: {cluster: staging, user: bob, namespace: api}
- name: staging-bare
  context: {cluster: staging, user: bob}
current-context: prod-web
`

// kubectl's flags select what kubectl would: the current context's cluster, user and namespace
// unless --context, --cluster, --user or -n say otherwise; a context without a namespace means
// "default"; --as impersonates and --request-timeout bounds each request.
func TestKubectlFlagsSelectWhatKubectlWould(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(twoClusterKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		args      []string
		env       bool // kubeconfig from $KUBECONFIG instead of --kubeconfig
		host      string
		token     string
		namespace string
		as        string
		timeout   time.Duration
	}{
		{name: "current context", host: "https://prod.example:6443", token: "alice-token", namespace: "web"},
		{name: "current context from KUBECONFIG", env: true, host: "https://prod.example:6443", token: "alice-token", namespace: "web"},
		{name: "-n overrides the context's namespace", args: []string{"-n", "payments"}, host: "https://prod.example:6443", token: "alice-token", namespace: "payments"},
		{name: "--namespace= form", args: []string{"--namespace=payments"}, host: "https://prod.example:6443", token: "alice-token", namespace: "payments"},
		{name: "--context switches cluster, user and namespace", args: []string{"--context", "staging-api"}, host: "https://staging.example:6443", token: "bob-token", namespace: "api"},
		{name: "--context with -n", args: []string{"--context", "staging-api", "-n", "jobs"}, host: "https://staging.example:6443", token: "bob-token", namespace: "jobs"},
		{name: "context without namespace means default", args: []string{"--context", "staging-bare"}, host: "https://staging.example:6443", token: "bob-token", namespace: "default"},
		{name: "--cluster keeps the context's user and namespace", args: []string{"--cluster", "staging"}, host: "https://staging.example:6443", token: "alice-token", namespace: "web"},
		{name: "--user keeps the context's cluster", args: []string{"--user", "bob"}, host: "https://prod.example:6443", token: "bob-token", namespace: "web"},
		{name: "--as and --request-timeout", args: []string{"--as", "system:serviceaccount:web:deployer", "--request-timeout", "7s"}, host: "https://prod.example:6443", token: "alice-token", namespace: "web", as: "system:serviceaccount:web:deployer", timeout: 7 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := newFlagSet("explain", "", io.Discard)
			var kf kubectlFlags
			kf.register(fs, false)
			args := tt.args
			if tt.env {
				t.Setenv("KUBECONFIG", path)
			} else {
				t.Setenv("KUBECONFIG", "")
				args = append([]string{"--kubeconfig", path}, args...)
			}
			if err := fs.Parse(append([]string{"deployment/web"}, args...)); err != nil {
				t.Fatal(err)
			}
			if got := fs.Args(); len(got) != 1 || got[0] != "deployment/web" {
				t.Errorf("positional arguments %q, want [deployment/web]", got)
			}
			ns, err := kf.namespace()
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := kf.restConfig()
			if err != nil {
				t.Fatal(err)
			}
			if ns != tt.namespace || cfg.Host != tt.host || cfg.BearerToken != tt.token || cfg.Impersonate.UserName != tt.as || cfg.Timeout != tt.timeout {
				t.Errorf("namespace %q host %q token %q as %q timeout %v; want %q %q %q %q %v",
					ns, cfg.Host, cfg.BearerToken, cfg.Impersonate.UserName, cfg.Timeout,
					tt.namespace, tt.host, tt.token, tt.as, tt.timeout)
			}
		})
	}
}

// watch and record follow one namespace the way kubectl get --watch does, or all with -A.
func TestKubectlFlagsWatched(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(path, []byte(twoClusterKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want []string
	}{
		{nil, []string{"web"}},
		{[]string{"-n", "jobs"}, []string{"jobs"}},
		{[]string{"-A"}, nil},
		{[]string{"--all-namespaces", "-n", "jobs"}, nil},
	}
	for _, tt := range tests {
		fs := newFlagSet("watch", "", io.Discard)
		var kf kubectlFlags
		kf.register(fs, true)
		if err := fs.Parse(append([]string{"--kubeconfig", path}, tt.args...)); err != nil {
			t.Fatal(err)
		}
		got, err := kf.watched()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tt.want) || (len(got) == 1 && got[0] != tt.want[0]) {
			t.Errorf("%v: watched %q, want %q", tt.args, got, tt.want)
		}
	}
}

func TestProgramName(t *testing.T) {
	tests := []struct{ arg0, want string }{
		{"readyspan", "readyspan"},
		{"/usr/local/bin/readyspan", "readyspan"},
		{"/usr/local/bin/kubectl-readyspan", "kubectl readyspan"},
		{"kubectl-readyspan.exe", "kubectl readyspan"},
		{"/home/u/.krew/bin/kubectl-ready_span", "kubectl ready-span"},
		{"./bin/kubectl-", "readyspan"},
	}
	for _, tt := range tests {
		if got := programName(tt.arg0); got != tt.want {
			t.Errorf("programName(%q) = %q, want %q", tt.arg0, got, tt.want)
		}
	}
}

// --trace-context is on unless set off, and refuses anything but on and off.
func TestTraceContextFlag(t *testing.T) {
	for _, tt := range []struct {
		args   []string
		ignore bool
		err    bool
	}{
		{nil, false, false},
		{[]string{"--trace-context=on"}, false, false},
		{[]string{"--trace-context", "off"}, true, false},
		{[]string{"--trace-context=false"}, false, true},
		{[]string{"--trace-context="}, false, true},
	} {
		var tf traceFlags
		fs := newFlagSet("watch", "", io.Discard)
		tf.register(fs)
		err := fs.Parse(tt.args)
		if (err != nil) != tt.err {
			t.Errorf("%v: error %v, want one: %v", tt.args, err, tt.err)
			continue
		}
		if err == nil && tf.config().IgnoreTraceContext != tt.ignore {
			t.Errorf("%v: IgnoreTraceContext %v, want %v", tt.args, tf.config().IgnoreTraceContext, tt.ignore)
		}
	}
}
