// Package helm holds readyspan's Helm chart (readyspan/). Its tests render the chart with the
// helm binary that deploy/local/scripts/build.sh builds into bin/ (its own module,
// deploy/local/tools/helm) and the kustomize base in process, and hold the two to the same
// objects for the same settings; they also run helm lint, and check that values.schema.json
// rejects bad values and that the packaged chart carries the rules, dashboard and RBAC of their
// single sources. Without bin/helm they skip (and fail under CI=true).
package helm

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const (
	chartDir = "readyspan"
	release  = "readyspan" // the release name that gives the base's object names
	ns       = "readyspan" // the base's namespace
)

// helmBin is bin/helm, or the test skips (fails in CI, which builds it with make cluster-build).
func helmBin(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../bin/helm")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bin/helm not built: CI must check the chart (make cluster-build first): %v", err)
		}
		t.Skipf("SKIPPED: bin/helm not built, so the chart is not checked (deploy/local/scripts/build.sh helm): %v", err)
	}
	return p
}

// runHelm runs bin/helm and returns its standard output, or the error with its standard error.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBin(t), args...)
	// No repositories, plugins or caches of the user's: the chart needs none.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// template renders the chart as release readyspan in namespace readyspan with the values (YAML)
// and helm template's extra arguments.
func template(t *testing.T, values string, extra ...string) (string, error) {
	t.Helper()
	// Not t.TempDir(): its path has the test's name, and helm splits -f at commas.
	dir, err := os.MkdirTemp("", "readyspan-chart-values")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	file := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(file, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"template", release, chartDir, "--namespace", ns, "-f", file}, extra...)
	return runHelm(t, args...)
}

func mustTemplate(t *testing.T, values string, extra ...string) []map[string]any {
	t.Helper()
	out, err := template(t, values, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

func decode(t *testing.T, docs string) []map[string]any {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(docs), 4096)
	var out []map[string]any
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decode YAML: %v\n%s", err, docs)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
}

// kustomize renders an overlay (its kustomization.yaml text, with paths relative to this
// directory's parent, deploy/) in a temporary directory, as `kubectl apply -k` would.
func kustomize(t *testing.T, kustomization string, extraDirs map[string]string) []map[string]any {
	t.Helper()
	deploy, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// kustomize takes only relative paths to other kustomizations.
	rel := func(from, to string) string {
		r, err := filepath.Rel(from, to)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	write := func(d, k string) {
		k = strings.ReplaceAll(k, "@DEPLOY@", rel(d, deploy))
		k = strings.ReplaceAll(k, "@TMP@", rel(d, dir))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "kustomization.yaml"), []byte(k), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(dir, kustomization)
	for sub, k := range extraDirs {
		write(filepath.Join(dir, sub), k)
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsNone
	m, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize: %v", err)
	}
	var out []map[string]any
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, decode(t, string(y))...)
	}
	return out
}

// helmLabels are the labels Helm's best practice adds to every object (and, for instance, to
// the selectors, so that two releases never select each other's Pods), with the value each must
// have. normalise removes them after checking the value: any other label is a real difference.
func helmLabels(t *testing.T, version string) map[string]string {
	t.Helper()
	var chart struct{ Version, AppVersion string }
	data, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := utilyaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"helm.sh/chart":                "readyspan-" + chart.Version,
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/version":    cmp.Or(version, chart.AppVersion),
		"app.kubernetes.io/managed-by": "Helm",
	}
}

// labelMaps are the keys under which a map of labels sits: an object's or a template's labels, a
// label selector's matchLabels, and a Service's selector.
var labelMaps = map[string]bool{"labels": true, "matchLabels": true}

// normalise strips what the chart adds by Helm's conventions from objs, and returns the problems
// with those additions (a wrong value, or a selector without the instance label).
func normalise(objs []map[string]any, added map[string]string) []string {
	var problems []string
	var walk func(path string, v any, serviceSpec bool)
	strip := func(path string, m map[string]any) {
		for k, want := range added {
			got, ok := m[k]
			if !ok {
				continue
			}
			if got != want {
				problems = append(problems, fmt.Sprintf("%s: %s=%v, want %q", path, k, got, want))
			}
			delete(m, k)
		}
	}
	walk = func(path string, v any, serviceSpec bool) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				p := path + "." + k
				if m, ok := c.(map[string]any); ok && (labelMaps[k] || (serviceSpec && k == "selector")) {
					strip(p, m)
					if len(m) == 0 {
						delete(v, k) // the base had no labels here
					}
				}
				walk(p, c, k == "spec" && strings.HasPrefix(path, "Service/"))
			}
		case []any:
			for i, c := range v {
				walk(fmt.Sprintf("%s[%d]", path, i), c, false)
			}
		}
	}
	for _, o := range objs {
		walk(key(o), o, false)
	}
	return problems
}

// key names an object: kind/namespace/name.
func key(o map[string]any) string {
	md, _ := o["metadata"].(map[string]any)
	namespace, _ := md["namespace"].(string)
	return fmt.Sprintf("%v/%s/%v", o["kind"], cmp.Or(namespace, "-"), md["name"])
}

func byKey(objs []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		out[key(o)] = o
	}
	return out
}

// diffObjects lists every difference between two sets of objects: objects only in one, and
// each path whose value differs.
func diffObjects(chart, base []map[string]any) []string {
	c, b := byKey(chart), byKey(base)
	var out []string
	for k := range b {
		if _, ok := c[k]; !ok {
			out = append(out, "only in the kustomize base: "+k)
		}
	}
	for k := range c {
		if _, ok := b[k]; !ok {
			out = append(out, "only in the chart: "+k)
		}
	}
	for k, co := range c {
		if bo, ok := b[k]; ok {
			out = append(out, diffValues(k, co, bo)...)
		}
	}
	sort.Strings(out)
	return out
}

func diffValues(path string, chart, base any) []string {
	cm, cok := chart.(map[string]any)
	bm, bok := base.(map[string]any)
	if cok && bok {
		var out []string
		keys := map[string]bool{}
		for k := range cm {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			out = append(out, diffValues(path+"."+k, cm[k], bm[k])...)
		}
		return out
	}
	cl, cok := chart.([]any)
	bl, bok := base.([]any)
	if cok && bok && len(cl) == len(bl) {
		var out []string
		for i := range cl {
			out = append(out, diffValues(fmt.Sprintf("%s[%d]", path, i), cl[i], bl[i])...)
		}
		return out
	}
	if reflect.DeepEqual(chart, base) {
		return nil
	}
	return []string{fmt.Sprintf("%s: chart %s, kustomize %s", path, js(chart), js(base))}
}

func js(v any) string {
	if v == nil {
		return "(absent)"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// The settings a user picks, each expressed both ways: chart values and a kustomize overlay of
// deploy/ (@DEPLOY@ is deploy/, @TMP@ the overlay's directory).
var equivalents = []struct {
	name        string
	version     string // the image tag, if not the release
	values      string
	helmArgs    []string
	kustomize   string
	extraLayers map[string]string
}{
	{
		name:   "the base",
		values: "namespace: {create: true}\n",
		kustomize: `resources:
  - @DEPLOY@/kubernetes
`,
	},
	{
		name:   "secure metrics",
		values: "namespace: {create: true}\nmetrics: {secure: true}\n",
		kustomize: `resources:
  - @DEPLOY@/kubernetes/base
components:
  - @DEPLOY@/kubernetes/components/secure-metrics
`,
	},
	{
		name:     "with prometheus-operator",
		values:   "namespace: {create: true}\n",
		helmArgs: []string{"--api-versions", "monitoring.coreos.com/v1"},
		kustomize: `resources:
  - @DEPLOY@/kubernetes/prometheus-operator
`,
	},
	{
		name:   "the Grafana dashboard in monitoring",
		values: "namespace: {create: true}\ngrafanaDashboard: {enabled: true, namespace: monitoring}\n",
		kustomize: `resources:
  - @DEPLOY@/kubernetes
  - @TMP@/grafana
`,
		extraLayers: map[string]string{"grafana": `namespace: monitoring
resources:
  - @DEPLOY@/grafana
`},
	},
	{
		// docs/install.md's quick start, and what the in-cluster e2e sets: another image, the
		// OTLP endpoint, plaintext, its headers from a Secret, one watched namespace.
		name:    "an installation's own settings",
		version: "v9.9.9",
		values: `namespace: {create: true}
image: {repository: registry.example/readyspan/readyspan, tag: v9.9.9}
otlp:
  endpoint: http://10.88.77.1:4317
  insecure: true
  headersSecret: {name: otlp-auth, key: headers}
extraArgs: ["--namespace=team-a"]
`,
		kustomize: `resources:
  - @DEPLOY@/kubernetes
images:
  - name: ghcr.io/readyspan/readyspan
    newName: registry.example/readyspan/readyspan
    newTag: v9.9.9
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: readyspan, namespace: readyspan}
      spec:
        template:
          spec:
            containers:
              - name: readyspan
                env:
                  - name: OTEL_EXPORTER_OTLP_ENDPOINT
                    value: http://10.88.77.1:4317
                  - name: OTEL_EXPORTER_OTLP_INSECURE
                    value: "true"
                  - name: OTEL_EXPORTER_OTLP_HEADERS
                    valueFrom:
                      secretKeyRef: {name: otlp-auth, key: headers}
  - target: {kind: Deployment, name: readyspan}
    patch: |
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --namespace=team-a
`,
	},
}

// compare renders both ways and returns the differences that remain after normalising.
func compare(t *testing.T, version, values string, helmArgs []string, kust string, layers map[string]string) []string {
	t.Helper()
	chart := mustTemplate(t, values, helmArgs...)
	base := kustomize(t, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"+kust, layers)
	problems := normalise(chart, helmLabels(t, version))
	// Kustomize orders env by the patch's merge; the container reads it as a set of names.
	sortEnv(chart)
	sortEnv(base)
	return append(problems, diffObjects(chart, base)...)
}

// sortEnv orders each container's env by name: a strategic merge patch places a new variable
// where it likes, and no variable here refers to another.
func sortEnv(objs []map[string]any) {
	for _, o := range objs {
		spec, _ := o["spec"].(map[string]any)
		tmpl, _ := spec["template"].(map[string]any)
		pspec, _ := tmpl["spec"].(map[string]any)
		containers, _ := pspec["containers"].([]any)
		for _, c := range containers {
			cm, _ := c.(map[string]any)
			env, _ := cm["env"].([]any)
			slices.SortStableFunc(env, func(a, b any) int {
				return strings.Compare(fmt.Sprint(a.(map[string]any)["name"]), fmt.Sprint(b.(map[string]any)["name"]))
			})
		}
	}
}

// TestChartMatchesKustomize: for the same settings, the chart renders the objects the kustomize
// base (with its components and overlays) renders, field for field, but for Helm's own labels.
func TestChartMatchesKustomize(t *testing.T) {
	helmBin(t)
	for _, tc := range equivalents {
		t.Run(tc.name, func(t *testing.T) {
			if d := compare(t, tc.version, tc.values, tc.helmArgs, tc.kustomize, tc.extraLayers); len(d) > 0 {
				t.Errorf("the chart and kustomize differ:\n  %s", strings.Join(d, "\n  "))
			}
		})
	}
}

// TestChartDiffFails proves the comparison can fail: settings that differ by one field, a label
// Helm's conventions do not add, or one of Helm's labels with a wrong value, are each reported.
func TestChartDiffFails(t *testing.T) {
	helmBin(t)
	base := "resources:\n  - @DEPLOY@/kubernetes\n"
	for _, tc := range []struct {
		name, values, want string
	}{
		{"another replica count", "namespace: {create: true}\nreplicas: 3\n", "Deployment/readyspan/readyspan.spec.replicas: chart 3, kustomize 2"},
		{"another memory limit", "namespace: {create: true}\nresources: {requests: {cpu: 50m, memory: 64Mi}, limits: {cpu: '1', memory: 512Mi}}\n", `limits.memory: chart "512Mi", kustomize "256Mi"`},
		{"a label of the user's", "namespace: {create: true}\npodLabels: {team: a}\n", `.labels.team: chart "a", kustomize (absent)`},
		{"no Namespace", "namespace: {create: false}\n", "only in the kustomize base: Namespace/-/readyspan"},
		{"an extra argument", "namespace: {create: true}\nextraArgs: [--backfill]\n", "args"},
		{"no PodDisruptionBudget", "namespace: {create: true}\npodDisruptionBudget: {enabled: false}\n", "only in the kustomize base: PodDisruptionBudget/readyspan/readyspan"},
		{"a Helm label with a wrong value", "namespace: {create: true}\nimage: {tag: v0.0.1}\n", "app.kubernetes.io/version=v0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := compare(t, "", tc.values, nil, base, nil)
			if !strings.Contains(strings.Join(d, "\n"), tc.want) {
				t.Errorf("want a difference with %q, got:\n  %s", tc.want, strings.Join(d, "\n  "))
			}
		})
	}
}

// TestLint runs helm lint --strict with the defaults and with every optional part on.
func TestLint(t *testing.T) {
	helmBin(t)
	all := filepath.Join(t.TempDir(), "all.yaml")
	if err := os.WriteFile(all, []byte(allOn), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"lint", "--strict", chartDir},
		{"lint", "--strict", chartDir, "-f", all},
	} {
		out, err := runHelm(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
}

// allOn turns on every optional part of the chart.
const allOn = `namespace: {create: true}
replicas: 2
shards: 3
otlp: {protocol: http, headers: {x-tenant: a}}
metrics:
  secure: true
  readerSubjects: [{kind: ServiceAccount, name: prometheus-k8s, namespace: monitoring}]
  tls: {secretName: readyspan-metrics-tls}
ui: {allowedHosts: [readyspan.readyspan.svc], traceURL: "http://jaeger.example/trace/{trace_id}", maxMiB: 32}
otlpReceive: {enabled: true, tls: {secretName: readyspan-otlp-tls}}
grafanaDashboard: {enabled: true, namespace: monitoring}
serviceMonitor: {labels: {release: kube-prometheus-stack}}
prometheusRule: {labels: {release: kube-prometheus-stack}}
`

// TestSchemaRejectsBadValues: values.schema.json (and the chart's own checks) refuse values of a
// wrong type, unknown keys and settings that cannot work, with a message naming the value; the
// same chart renders with good values.
func TestSchemaRejectsBadValues(t *testing.T) {
	helmBin(t)
	if _, err := template(t, allOn); err != nil {
		t.Fatalf("every optional part on: %v", err)
	}
	for _, tc := range []struct{ values, want string }{
		{"replicas: two\n", "replicas"},
		{"replicas: 0\n", "replicas"},
		{"replica: 2\n", "replica"}, // a typo of replicas
		{"otlp: {endpoint: http://x:4317, protcol: http}\n", "protcol"},
		{"otlp: {protocol: thrift}\n", "protocol"},
		{"image: {pullPolicy: Sometimes}\n", "pullPolicy"},
		{"image: {digest: latest}\n", "digest"},
		{"shards: 0\n", "shards"},
		{"shards: '2'\n", "shards"},
		{"extraArgs: [namespace=a]\n", "extraArgs"},
		{"namespace: {create: yes please}\n", "create"},
		{"serviceMonitor: {interval: soon}\n", "interval"},
		{"ui: {traceURL: http://jaeger/trace}\n", "traceURL"},
		{"otlpReceive: {enabled: true, port: 8080}\n", "port"},
		{"networkPolicy: {metricsFrom: monitoring}\n", "metricsFrom"},
		// Beyond the schema: the templates' own checks.
		{"leaderElection: {enabled: false}\n", "leaderElection.enabled"},
		{"otlp: {headers: {a: b}, headersSecret: {name: s}}\n", "not both"},
	} {
		t.Run(tc.values, func(t *testing.T) {
			_, err := template(t, tc.values)
			if err == nil {
				t.Fatalf("helm template accepted %q", tc.values)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("the error does not name %q: %v", tc.want, err)
			}
		})
	}
	// One replica without leader election is fine.
	if _, err := template(t, "replicas: 1\nleaderElection: {enabled: false}\n"); err != nil {
		t.Errorf("one replica without leader election: %v", err)
	}
}

// find returns the rendered objects of a kind.
func find(objs []map[string]any, kind string) []map[string]any {
	var out []map[string]any
	for _, o := range objs {
		if o["kind"] == kind {
			out = append(out, o)
		}
	}
	return out
}

// at follows keys (and list indexes) into an object.
func at(v any, path ...any) any {
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[p]
		case int:
			l, _ := v.([]any)
			if p >= len(l) {
				return nil
			}
			v = l[p]
		}
	}
	return v
}

func strs(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, fmt.Sprint(s))
	}
	return out
}

// TestShards: shards: 3 gives three Deployments, each tracing its part (--shard N
// --total-shards 3) with Pods that only its own selector, PodDisruptionBudget and anti-affinity
// select, and one Service over all of them for the scrape.
func TestShards(t *testing.T) {
	helmBin(t)
	objs := mustTemplate(t, "shards: 3\n")
	deps := find(objs, "Deployment")
	pdbs := find(objs, "PodDisruptionBudget")
	if len(deps) != 3 || len(pdbs) != 3 {
		t.Fatalf("%d Deployments and %d PodDisruptionBudgets, want 3 each", len(deps), len(pdbs))
	}
	for i, d := range deps {
		name := fmt.Sprintf("readyspan-shard-%d", i)
		if got := at(d, "metadata", "name"); got != name {
			t.Errorf("Deployment %d is %v, want %s", i, got, name)
		}
		shard := fmt.Sprint(i)
		sel := at(d, "spec", "selector", "matchLabels").(map[string]any)
		if sel["readyspan.dev/shard"] != shard {
			t.Errorf("%s selects %v, want shard %s", name, sel, shard)
		}
		if got := at(d, "spec", "template", "metadata", "labels", "readyspan.dev/shard"); got != shard {
			t.Errorf("%s's Pods are labelled shard %v", name, got)
		}
		if got := at(d, "spec", "template", "spec", "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution", 0, "podAffinityTerm", "labelSelector", "matchLabels", "readyspan.dev/shard"); got != shard {
			t.Errorf("%s spreads against shard %v", name, got)
		}
		args := strs(at(d, "spec", "template", "spec", "containers", 0, "args"))
		for _, want := range []string{"--shard=" + shard, "--total-shards=3", "--leader-elect", "--leader-elect-lease-name=readyspan"} {
			if !slices.Contains(args, want) {
				t.Errorf("%s args %v lack %s", name, args, want)
			}
		}
		if got := at(pdbs[i], "spec", "selector", "matchLabels", "readyspan.dev/shard"); got != shard {
			t.Errorf("PodDisruptionBudget %d selects shard %v", i, got)
		}
	}
	svc := find(objs, "Service")[0]
	if _, ok := at(svc, "spec", "selector").(map[string]any)["readyspan.dev/shard"]; ok {
		t.Errorf("the Service selects one shard only: %v", at(svc, "spec", "selector"))
	}
	// One shard is the base: no shard flags, no shard label.
	one := mustTemplate(t, "shards: 1\n")
	d := find(one, "Deployment")[0]
	if args := strings.Join(strs(at(d, "spec", "template", "spec", "containers", 0, "args")), " "); strings.Contains(args, "shard") {
		t.Errorf("one shard: args %s", args)
	}
}

// TestOTLPReceive: the optional OTLP input is a container port, a Service port, the flag, and a
// NetworkPolicy rule admitting only the configured senders; off, none of them.
func TestOTLPReceive(t *testing.T) {
	helmBin(t)
	objs := mustTemplate(t, "otlpReceive: {enabled: true, port: 4321}\n")
	d := find(objs, "Deployment")[0]
	c := at(d, "spec", "template", "spec", "containers", 0)
	if args := strs(at(c, "args")); !slices.Contains(args, "--otlp-receive=:4321") {
		t.Errorf("args %v lack --otlp-receive=:4321", args)
	}
	if at(c, "ports", 1, "name") != "otlp" || fmt.Sprint(at(c, "ports", 1, "containerPort")) != "4321" {
		t.Errorf("container ports %v: want otlp 4321", at(c, "ports"))
	}
	svc := find(objs, "Service")[0]
	if at(svc, "spec", "ports", 1, "name") != "otlp" || fmt.Sprint(at(svc, "spec", "ports", 1, "port")) != "4321" {
		t.Errorf("Service ports %v: want otlp 4321", at(svc, "spec", "ports"))
	}
	np := find(objs, "NetworkPolicy")[0]
	rule := at(np, "spec", "ingress", 1)
	if at(rule, "ports", 0, "port") != "otlp" ||
		at(rule, "from", 0, "namespaceSelector", "matchLabels", "kubernetes.io/metadata.name") != "observability" {
		t.Errorf("NetworkPolicy's OTLP rule %s: want port otlp from the observability namespace", js(rule))
	}
	off := mustTemplate(t, "")
	if s := js(off); strings.Contains(s, "otlp-receive") || strings.Contains(s, `"otlp"`) {
		t.Errorf("the OTLP input is there while off")
	}
}

// TestOTLPReceiveAuthenticated: once enabled, the OTLP input authenticates its senders unless
// the operator says otherwise: readyspan may ask the apiserver (TokenReview,
// SubjectAccessReview), the senders' ClusterRoles grant the verbs readyspan asks for on
// /v1/traces, and the subjects given are bound to them; with insecure, the flag and none of it.
func TestOTLPReceiveAuthenticated(t *testing.T) {
	helmBin(t)
	objs := mustTemplate(t, `otlpReceive:
  enabled: true
  nodeSenders: [{kind: ServiceAccount, name: collector, namespace: observability}]
  apiserverSenders: [{kind: ServiceAccount, name: apiserver-collector, namespace: kube-system}]
`)
	args := strs(at(find(objs, "Deployment")[0], "spec", "template", "spec", "containers", 0, "args"))
	if slices.Contains(args, "--otlp-receive-insecure") || !slices.Contains(args, "--otlp-receive-max-mib=32") || !slices.Contains(args, "--otlp-receive-inflight-mib=32") {
		t.Errorf("args %v: want the input authenticated and its memory bounded", args)
	}
	roles := map[string]string{}
	for _, r := range find(objs, "ClusterRole") {
		roles[fmt.Sprint(at(r, "metadata", "name"))] = js(at(r, "rules"))
	}
	for name, want := range map[string]string{
		"readyspan-delegated-auth":        `"tokenreviews"`,
		"readyspan-otlp-node-sender":      `"verbs":["create"]`,
		"readyspan-otlp-apiserver-sender": `"verbs":["create","create-apiserver"]`,
		"readyspan-otlp-gateway-sender":   `"verbs":["create","create-any-node"]`,
	} {
		if !strings.Contains(roles[name], want) {
			t.Errorf("ClusterRole %s: rules %s, want %s", name, roles[name], want)
		}
	}
	bound := map[string]string{}
	for _, b := range find(objs, "ClusterRoleBinding") {
		bound[fmt.Sprint(at(b, "roleRef", "name"))] = js(at(b, "subjects"))
	}
	if !strings.Contains(bound["readyspan-otlp-node-sender"], `"collector"`) || !strings.Contains(bound["readyspan-otlp-apiserver-sender"], `"apiserver-collector"`) {
		t.Errorf("bindings %v: want the given senders bound", bound)
	}
	if _, ok := bound["readyspan-otlp-gateway-sender"]; ok {
		t.Error("a gateway binding without gateway senders")
	}
	open := mustTemplate(t, "otlpReceive: {enabled: true, insecure: true}\n")
	if args := strs(at(find(open, "Deployment")[0], "spec", "template", "spec", "containers", 0, "args")); !slices.Contains(args, "--otlp-receive-insecure") {
		t.Errorf("insecure: args %v lack --otlp-receive-insecure", args)
	}
	if s := js(open); strings.Contains(s, "tokenreviews") || strings.Contains(s, "otlp-node-sender") {
		t.Error("insecure: the access rules' RBAC is there")
	}
}

// TestOTLPHeaders: headers given as values go into a Secret the container reads
// OTEL_EXPORTER_OTLP_HEADERS from (never into the Deployment), in key order, and a change rolls
// the Pods.
func TestOTLPHeaders(t *testing.T) {
	helmBin(t)
	envOf := func(objs []map[string]any) map[string]any {
		out := map[string]any{}
		for _, e := range at(find(objs, "Deployment")[0], "spec", "template", "spec", "containers", 0, "env").([]any) {
			out[fmt.Sprint(at(e, "name"))] = e
		}
		return out
	}
	checksum := func(objs []map[string]any) any {
		return at(find(objs, "Deployment")[0], "spec", "template", "metadata", "annotations", "checksum/otlp-headers")
	}
	a := mustTemplate(t, "otlp: {headers: {x-tenant: a, authorization: Bearer s3cret}}\n")
	secrets := find(a, "Secret")
	if len(secrets) != 1 || at(secrets[0], "stringData", "headers") != "authorization=Bearer s3cret,x-tenant=a" {
		t.Fatalf("Secrets %s: want one with headers authorization=...,x-tenant=a", js(secrets))
	}
	if strings.Contains(js(find(a, "Deployment")), "s3cret") {
		t.Error("the header's value is in the Deployment")
	}
	ref := at(envOf(a)["OTEL_EXPORTER_OTLP_HEADERS"], "valueFrom", "secretKeyRef")
	if at(ref, "name") != "readyspan-otlp-headers" || at(ref, "key") != "headers" {
		t.Errorf("OTEL_EXPORTER_OTLP_HEADERS from %s", js(ref))
	}
	b := mustTemplate(t, "otlp: {headers: {x-tenant: b, authorization: Bearer s3cret}}\n")
	if checksum(a) == nil || checksum(a) == checksum(b) {
		t.Errorf("checksums %v and %v: a change of headers must change the Pod template", checksum(a), checksum(b))
	}
	none := mustTemplate(t, "")
	if len(find(none, "Secret")) != 0 || envOf(none)["OTEL_EXPORTER_OTLP_HEADERS"] != nil || checksum(none) != nil {
		t.Error("without headers: a Secret, the variable or the checksum is there")
	}
}

// TestPackage: helm package (make dist) writes the chart at the release's version, and the
// files the chart takes from their single sources (the rules, the dashboard, the ClusterRole)
// are in it with those sources' content.
func TestPackage(t *testing.T) {
	helmBin(t)
	v, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(v))
	dir := t.TempDir()
	if _, err := runHelm(t, "package", chartDir, "--version", strings.TrimPrefix(version, "v"), "--app-version", version, "-d", dir); err != nil {
		t.Fatal(err)
	}
	tgz := filepath.Join(dir, "readyspan-"+strings.TrimPrefix(version, "v")+".tgz")
	files := untar(t, tgz)
	for packed, source := range map[string]string{
		"readyspan/files/alerts.yaml":      "../prometheus/alerts.yaml",
		"readyspan/files/readyspan.json":   "../grafana/readyspan.json",
		"readyspan/files/clusterrole.yaml": "../kubernetes/base/clusterrole.yaml",
		"readyspan/values.schema.json":     "readyspan/values.schema.json",
	} {
		want, err := os.ReadFile(source)
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := files[packed]; !ok || !bytes.Equal(got, want) {
			t.Errorf("%s in the package (%d bytes, present %v) is not %s (%d bytes)", packed, len(got), ok, source, len(want))
		}
	}
	var chart struct{ Version, AppVersion string }
	if err := utilyaml.Unmarshal(files["readyspan/Chart.yaml"], &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != strings.TrimPrefix(version, "v") || chart.AppVersion != version {
		t.Errorf("packaged Chart.yaml: version %q appVersion %q, want %q and %q", chart.Version, chart.AppVersion, strings.TrimPrefix(version, "v"), version)
	}
}

func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			t.Errorf("%s in the package is not a regular file (type %c)", h.Name, h.Typeflag)
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = data
	}
}

// nodeValues turn on the node component as docs/last-mile.md installs it.
const nodeValues = `replicas: 1
otlpReceive: {enabled: true, tls: {secretName: readyspan-otlp-tls}}
node: {enabled: true, caConfigMap: {name: readyspan-otlp-ca}}
`

// TestNodeMatchesKustomize: the chart's node component is, object for object, the kustomize
// component deploy/kubernetes/components/node (the node's namespace and what is in it, and
// the node-sender role bound to its ServiceAccount).
func TestNodeMatchesKustomize(t *testing.T) {
	helmBin(t)
	var chart []map[string]any
	for _, o := range mustTemplate(t, nodeValues) {
		md, _ := o["metadata"].(map[string]any)
		if md["namespace"] == "readyspan-node" || md["name"] == "readyspan-node" || md["name"] == "readyspan-otlp-node-sender" {
			chart = append(chart, o)
		}
	}
	base := kustomize(t, "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n  - @DEPLOY@/kubernetes/components/node\n", nil)
	d := append(normalise(chart, helmLabels(t, "")), diffObjects(chart, base)...)
	if len(d) > 0 {
		t.Errorf("the chart's node component and kustomize's differ:\n  %s", strings.Join(d, "\n  "))
	}
	if len(base) != 5 {
		t.Errorf("kustomize's node component has %d objects, want 5 (Namespace, ServiceAccount, DaemonSet, ClusterRole, ClusterRoleBinding)", len(base))
	}
}

// TestNode: the node component's DaemonSet has the least privilege that reads the rules, its
// one credential is a Pod-bound token the OTLP input checks, it runs on every node, and it
// sends to the input's Service; settings that cannot work are refused with what to do.
func TestNode(t *testing.T) {
	helmBin(t)
	objs := mustTemplate(t, nodeValues)
	ds := find(objs, "DaemonSet")[0]
	pod := at(ds, "spec", "template", "spec")
	c := at(pod, "containers", 0)
	if at(pod, "hostNetwork") != true || at(pod, "automountServiceAccountToken") != false || at(pod, "dnsPolicy") != "ClusterFirstWithHostNet" {
		t.Errorf("pod spec %s: want the host's network, no API token, the cluster's DNS", js(pod))
	}
	wantSC := `{"allowPrivilegeEscalation":false,"capabilities":{"add":["NET_ADMIN"],"drop":["ALL"]},"privileged":false,"readOnlyRootFilesystem":true,"runAsGroup":0,"runAsUser":0}`
	if sc := js(at(c, "securityContext")); sc != wantSC {
		t.Errorf("securityContext %s, want %s", sc, wantSC)
	}
	if tol := js(at(pod, "tolerations")); tol != `[{"operator":"Exists"}]` {
		t.Errorf("tolerations %s: want every taint tolerated", tol)
	}
	if at(c, "resources", "limits", "memory") == nil || at(c, "resources", "requests", "cpu") == nil {
		t.Errorf("resources %s", js(at(c, "resources")))
	}
	args := strs(at(c, "args"))
	for _, want := range []string{"node", "--otlp-endpoint=https://readyspan.readyspan.svc:4321", "--otlp-token-file=/var/run/secrets/readyspan/token", "--otlp-ca-file=/etc/readyspan/otlp-ca/ca.crt", "--metrics-addr=127.0.0.1:9465"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %v lack %s", args, want)
		}
	}
	if tok := js(at(pod, "volumes", 0, "projected", "sources", 0, "serviceAccountToken")); tok != `{"expirationSeconds":3600,"path":"token"}` {
		t.Errorf("token %s: want a projected token with the apiserver's audience", tok)
	}
	ns := find(objs, "Namespace")
	if len(ns) != 1 || at(ns[0], "metadata", "labels", "pod-security.kubernetes.io/enforce") != "privileged" {
		t.Errorf("the node's namespace %s: want it labelled privileged", js(ns))
	}
	for _, b := range find(objs, "ClusterRoleBinding") {
		if at(b, "roleRef", "name") == "readyspan-otlp-node-sender" {
			if s := js(at(b, "subjects")); s != `[{"kind":"ServiceAccount","name":"readyspan-node","namespace":"readyspan-node"}]` {
				t.Errorf("node-sender subjects %s", s)
			}
		}
	}
	if _, err := runHelm(t, "lint", "--strict", chartDir, "--set", "replicas=1,otlpReceive.enabled=true,otlpReceive.tls.secretName=s,node.enabled=true,node.caConfigMap.name=ca"); err != nil {
		t.Error(err)
	}

	open := mustTemplate(t, "replicas: 1\notlpReceive: {enabled: true, insecure: true}\nnode: {enabled: true}\n")
	oc := at(find(open, "DaemonSet")[0], "spec", "template", "spec")
	if args := strs(at(oc, "containers", 0, "args")); !slices.Contains(args, "--otlp-insecure") || !slices.Contains(args, "--otlp-endpoint=http://readyspan.readyspan.svc:4321") || at(oc, "volumes") != nil {
		t.Errorf("insecure input: args %v, volumes %s: want plain text and no token", args, js(at(oc, "volumes")))
	}
	if off := js(mustTemplate(t, "")); strings.Contains(off, "DaemonSet") || strings.Contains(off, "readyspan-node") {
		t.Error("the node component is there while off")
	}

	for _, tc := range []struct{ values, want string }{
		{"node: {enabled: true}\n", "otlpReceive.enabled"},
		{"otlpReceive: {enabled: true}\nnode: {enabled: true}\n", "replicas: 1"},
		{"replicas: 1\nshards: 2\nleaderElection: {enabled: true}\notlpReceive: {enabled: true}\nnode: {enabled: true}\n", "shards: 1"},
		{"replicas: 1\notlpReceive: {enabled: true}\nnode: {enabled: true, caConfigMap: {name: a}}\n", "otlpReceive.tls.secretName"},
		{"replicas: 1\notlpReceive: {enabled: true, tls: {secretName: s}}\nnode: {enabled: true}\n", "node.caConfigMap.name"},
		{"replicas: 1\notlpReceive: {enabled: true, tls: {secretName: s}}\nnode: {enabled: true, caConfigMap: {name: a}, namespace: readyspan}\n", "restricted"},
		{"node: {namespace: Not_A_Name}\n", "namespace"},
		{"node: {tokenExpirationSeconds: 60}\n", "tokenExpirationSeconds"},
		{"node: {poll: often}\n", "poll"},
		{"node: {metricsAddr: loopback}\n", "metricsAddr"},
		{"node: {extraArgs: [poll=1s]}\n", "extraArgs"},
	} {
		if _, err := template(t, tc.values); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %q: error %v, want one naming %q", tc.values, err, tc.want)
		}
	}
}
