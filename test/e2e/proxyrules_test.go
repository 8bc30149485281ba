//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/readyspan/readyspan/dataplane"
	"github.com/readyspan/readyspan/dataplane/proxyrules"
)

// TestProxyRules checks dataplane/proxyrules against the real kernel, in both kube-proxy modes:
// with a Service of 3 Ready Pods on the node, Read has exactly the EndpointSlice's ready addresses
// of it; scaled to 2, the Watcher reports one Removed change within a second of the test's own
// watch seeing the slice change. It switches kube-proxy with deploy/local/scripts/kube-proxy.sh
// and leaves it in iptables mode.
func TestProxyRules(t *testing.T) {
	e := Setup(t)
	if os.Geteuid() != 0 {
		Missing(t, "root: reading nftables over netlink needs CAP_NET_ADMIN")
	}
	t.Cleanup(func() { e.script(t, "kube-proxy.sh", "mode", dataplane.ModeIPTables) })
	for _, mode := range []string{dataplane.ModeNFTables, dataplane.ModeIPTables} {
		t.Run(mode, func(t *testing.T) {
			e.script(t, "kube-proxy.sh", "mode", mode)
			testProxyRules(t, e, mode)
		})
	}
}

func testProxyRules(t *testing.T, e *Env, mode string) {
	ctx := Ctx(t)
	ns := e.Namespace(t, "proxyrules-"+mode)
	web := webDeployment("web", 3)
	web.Spec.Template.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": NodeName}
	e.createDeployment(t, ns, web)
	e.createService(t, ns, service("web"))
	e.WaitPodsReady(t, ns, "app=web", 3, 2*time.Minute)
	var want []string
	Eventually(t, time.Minute, "3 ready addresses in the slice and in the rules", func() (bool, error) {
		want = readyAddresses(t, e, ns)
		got := ruleAddresses(t, ns, mode)
		return len(want) == 3 && equal(got, want), nil
	})
	t.Logf("%s: Read has the slice's ready addresses %v", mode, want)

	// The test's own watch of the slice, started before the Watcher so it misses nothing.
	sw, err := e.Kube.DiscoveryV1().EndpointSlices(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Stop()
	w, err := proxyrules.NewWatcher(proxyrules.Options{Node: NodeName})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var changes []dataplane.Change
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_ = w.Run(wctx, func(cs []dataplane.Change) {
			mu.Lock()
			defer mu.Unlock()
			for _, c := range cs {
				if c.Namespace == ns {
					changes = append(changes, c)
				}
			}
		})
	}()
	Eventually(t, 10*time.Second, "the Watcher's first read", func() (bool, error) {
		m, n := w.Current()
		return m == mode && n > 0, nil
	})

	scale := []byte(`{"spec":{"replicas":2}}`)
	if _, err := e.Kube.AppsV1().Deployments(ns).Patch(ctx, "web", "application/merge-patch+json", scale, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	sliceAt, gone := sliceShrinks(t, sw, 3, 30*time.Second)
	Eventually(t, 10*time.Second, "the Watcher's Removed change", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(changes) > 0, nil
	})
	time.Sleep(2 * time.Second) // anything else it would (wrongly) report
	mu.Lock()
	defer mu.Unlock()
	if len(changes) != 1 || changes[0].In || changes[0].Address.String() != gone || changes[0].Mode != mode ||
		changes[0].Service != "web" || changes[0].PortName != "http" || changes[0].Protocol != "tcp" {
		t.Fatalf("%s: changes %+v, want one Removed of %s (web:http tcp)", mode, changes, gone)
	}
	c := changes[0]
	d := c.At.Sub(sliceAt)
	t.Logf("%s: %s removed at %s, %s after the test's watch saw the slice change (precision %s; compare kube-proxy's log, %s)",
		mode, c.Endpoint, c.At.UTC().Format("15:04:05.000000"), d, c.Precision, filepath.Join(e.State, "logs", "kube-proxy.log"))
	// kube-proxy applies a change at most minSyncPeriod (1s, config/kube-proxy.yaml) after its
	// previous sync, which other workloads of the shared cluster may have just triggered.
	if d < -time.Second || d > time.Second {
		t.Errorf("%s: the change is %s from the slice's change, want within 1s", mode, d)
	}
	if c.Precision <= 0 || c.Precision > time.Second {
		t.Errorf("%s: precision %s, want (0, 1s]", mode, c.Precision)
	}
}

// readyAddresses are the ready addresses of the Service web's EndpointSlices in ns.
func readyAddresses(t *testing.T, e *Env, ns string) []string {
	list, err := e.Kube.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=web"})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		out = append(out, sliceReady(&s)...)
	}
	sort.Strings(out)
	return out
}

func sliceReady(s *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, ep := range s.Endpoints {
		if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
			out = append(out, ep.Addresses...)
		}
	}
	return out
}

// ruleAddresses are the addresses Read finds in web:http's rotation in ns, failing the test if
// the rules are of another mode or hold anything else of ns.
func ruleAddresses(t *testing.T, ns, mode string) []string {
	s, err := proxyrules.Read()
	if err != nil {
		t.Fatal(err)
	}
	if s.Mode != mode {
		t.Fatalf("Read: mode %q, want %q", s.Mode, mode)
	}
	var out []string
	for ep := range s.Endpoints {
		if ep.Namespace != ns {
			continue
		}
		if ep.Service != "web" || ep.PortName != "http" || ep.Protocol != "tcp" || ep.Port != 8080 {
			t.Fatalf("Read: unexpected endpoint %s (%s)", ep, ep.Protocol)
		}
		out = append(out, ep.Address.String())
	}
	sort.Strings(out)
	return out
}

// sliceShrinks waits on the slice watch for the ready addresses to drop below from, and returns
// when it saw that and the address that left.
func sliceShrinks(t *testing.T, w watch.Interface, from int, timeout time.Duration) (time.Time, string) {
	deadline := time.After(timeout)
	prev := map[string]bool{}
	for {
		select {
		case ev, ok := <-w.ResultChan():
			at := time.Now()
			if !ok {
				t.Fatal("the EndpointSlice watch ended")
			}
			s, isSlice := ev.Object.(*discoveryv1.EndpointSlice)
			if !isSlice || s.Labels[discoveryv1.LabelServiceName] != "web" {
				continue
			}
			ready := sliceReady(s)
			if len(ready) >= from {
				for _, a := range ready {
					prev[a] = true
				}
				continue
			}
			for _, a := range ready {
				delete(prev, a)
			}
			for a := range prev {
				return at, a
			}
			t.Fatalf("the slice shrank to %v, but which address left is unknown", ready)
		case <-deadline:
			t.Fatalf("the EndpointSlice did not shrink below %d ready within %s", from, timeout)
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
