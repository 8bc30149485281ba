package daemon

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/readyspan/readyspan/exporters/otlp"
	promexp "github.com/readyspan/readyspan/exporters/prometheus"
	"github.com/readyspan/readyspan/leader"
	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/otlpin"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
	"github.com/readyspan/readyspan/web"
)

// counting is an exporter that counts what reaches it.
type counting struct{ pods, rollouts, nodes int }

func (c *counting) ExportPod(*phases.Trace)      { c.pods++ }
func (c *counting) ExportRollout(*rollout.Trace) { c.rollouts++ }
func (c *counting) ExportNode(*node.Trace)       { c.nodes++ }

type noMetrics struct{}

func (noMetrics) SetLeader(bool) {}
func (noMetrics) Dropped(string) {}

// Pod, rollout and node traces take one road: every replica's exporters (the UI) get each, and
// only a leader's get any; a standby's leader-only exporters get none.
func TestRouterGatesPodsAndRolloutsAlike(t *testing.T) {
	p := &phases.Pod{UID: "9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f", Name: "web-1", Namespace: "default", Root: phases.RootBarePod}
	p.Created.Add(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), phases.SourceWatch)
	p.Ready.Add(time.Date(2026, 11, 30, 8, 0, 3, 0, time.UTC), phases.SourceWatch)
	pod := phases.Build(p, phases.Options{})
	ro := rollout.Build(&rollout.Rollout{Workload: rollout.Workload{Kind: rollout.Deployment, Name: "web", Namespace: "default", UID: "uid-web"}, Generation: 1})
	nd := node.Build(&node.Startup{Name: "n1", UID: "uid-n1", Outcome: node.OutcomeReady})
	for _, tc := range []struct {
		name    string
		elected bool // with leader election and no Lease taken: a standby
		leading bool
	}{
		{"single replica", false, true},
		{"standby", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ui, out := &counting{}, &counting{}
			r := &router{leaderOnly: []Exporter{out}, everyReplica: []Exporter{ui}}
			r.gate = leader.New(leader.Config{Elected: tc.elected, Leases: fake.NewClientset().CoordinationV1().Leases("default"),
				Lease: "readyspan", Sink: tracer.SinkFunc(r.exportPod), Metrics: noMetrics{}})
			sink, rollouts, nodes := r.sinks()
			sink.Export(pod)
			rollouts.ExportRollout(ro)
			nodes.ExportNode(nd)
			if ui.pods != 1 || ui.rollouts != 1 || ui.nodes != 1 {
				t.Errorf("every replica's exporter got %d Pods, %d rollouts and %d nodes, want 1 of each", ui.pods, ui.rollouts, ui.nodes)
			}
			want := 0
			if tc.leading {
				want = 1
			}
			if out.pods != want || out.rollouts != want || out.nodes != want {
				t.Errorf("the leader's exporter got %d Pods, %d rollouts and %d nodes, want %d of each", out.pods, out.rollouts, out.nodes, want)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	ok := Options{MetricsAddr: ":8080", OTLP: otlp.Config{QueueTraces: 1, QueueBytes: 1}}
	for _, tc := range []struct {
		name   string
		change func(o *Options)
		want   string // "" for valid
	}{
		{"defaults", func(*Options) {}, ""},
		{"no metrics address", func(o *Options) { o.MetricsAddr = "" }, "--metrics-addr"},
		{"empty queue", func(o *Options) { o.OTLP.QueueBytes = 0 }, "--otlp-queue-bytes"},
		{"UI without bounds", func(o *Options) { o.UI = UIOptions{Enabled: true} }, "--ui-rollouts"},
		{"trace UI not http", func(o *Options) {
			o.UI = UIOptions{Enabled: true, MaxRollouts: 1, MaxPods: 1, MaxMiB: 1, TraceURL: "javascript:x//{trace_id}"}
		}, "--trace-ui-url"},
		{"election without a Lease", func(o *Options) { o.Leader = LeaderOptions{Elect: true} }, "--leader-elect"},
		{"per-team labels", func(o *Options) { o.Metrics = promexp.Options{PodLabels: []string{"namespace"}, LabelLimit: 5} }, ""},
		{"an unknown metrics label", func(o *Options) { o.Metrics = promexp.Options{PodLabels: []string{"node"}, LabelLimit: 5} }, "--metrics-pod-labels"},
		{"OTLP input", func(o *Options) { o.Receive.Addr = "127.0.0.1:4321" }, ""},
		{"OTLP input without a port", func(o *Options) { o.Receive.Addr = "127.0.0.1" }, "--otlp-receive"},
		{"OTLP input on the metrics address", func(o *Options) { o.Receive.Addr = ":8080" }, "--metrics-addr must differ"},
		{"OTLP input waiting less than nothing", func(o *Options) { o.Receive = ReceiveOptions{Config: otlpin.Config{Addr: ":4321"}, Wait: -1} }, "--otlp-receive-wait"},
		{"protobuf watches", func(o *Options) { o.Pipeline.Watch.Encoding = watch.EncodingProtobuf }, ""},
		{"JSON watches", func(o *Options) { o.Pipeline.Watch.Encoding = watch.EncodingJSON }, ""},
		{"an unknown watch encoding", func(o *Options) { o.Pipeline.Watch.Encoding = "cbor" }, "--watch-encoding: unknown watch encoding \"cbor\": want protobuf or json"},
		{"OTLP input certificate without key", func(o *Options) { o.Receive.Config = otlpin.Config{Addr: ":4321", CertFile: "c"} }, "go together"},
	} {
		o := ok
		tc.change(&o)
		err := o.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The UI's ring, on every replica, keeps node startups as it keeps Pods and rollouts.
func TestRouterHandsNodesToTheUI(t *testing.T) {
	d := &Daemon{client: fake.NewClientset(), metrics: promexp.New(prometheus.NewRegistry(), "test", nil, promexp.Options{})}
	ui := web.NewRing(web.RingConfig{})
	r := d.newRouter(ui)
	nd := node.Build(&node.Startup{Name: "n1", UID: "uid-n1", Outcome: node.OutcomeReady})
	for _, e := range r.everyReplica {
		e.ExportNode(nd)
	}
	if got := ui.Nodes(); len(got) != 1 || got[0].Name != "n1" {
		t.Errorf("the UI's ring holds %+v, want node n1", got)
	}
}
