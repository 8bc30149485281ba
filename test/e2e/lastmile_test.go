//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestLastMile checks the last mile against a prober on the real node, in both of kube-proxy's
// modes: readyspan node reads the node's kube-proxy rules and reports them to readyspan's OTLP
// input; the prober, in the node's network namespace, opens connections to the Service's
// ClusterIP from 8 workers every 10 ms (up to 800 a second), each answered by the Pod's name,
// and records per Pod the first and last connection it answered.
//
//   - Each new Pod's status.programming ends (the node put it in its rules) no later than 20 ms
//     after its first answer, and no earlier than 20 ms + the time the prober needs to reach one
//     Pod of the 4 in rotation with probability 1−10⁻⁴ (4·ln 10⁴ / the rate it reached) before
//     it: each connection lands on one of them at random.
//   - Each old Pod's rollout.pod.rotation ends (the node took it out) within the same bounds of
//     its last answer, mirrored.
//   - A rolling update whose old Pods keep answering after SIGTERM (busybox httpd, PID 1, ignores
//     it) without a preStop hook has them in rotation after their stop, on the trace and in the
//     rollout's sentence, and the prober saw them answer after their deletion; with
//     `preStop: {sleep: {seconds: 3}}` neither, and no answer came 3 s after their deletion.
func TestLastMile(t *testing.T) {
	e := Setup(t)
	e.withOTLPReceive(t)
	t.Cleanup(func() { e.script(t, "kube-proxy.sh", "mode", "iptables") }) // the cluster's own mode
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) { e.lastMile(t, mode) })
	}
}

const (
	proberWorkers  = 8
	proberInterval = 10 * time.Millisecond
	// lastMilePrecision is how close the node component's stamp must be to what the prober sees.
	lastMilePrecision = 20 * time.Millisecond
)

// proberReach is how long the prober, at rate connections a second, may take to open one that
// lands on one given Pod of n, with probability 1−10⁻⁴: each connection picks one of n at random.
func proberReach(n int, rate float64) time.Duration {
	return time.Duration(float64(n) * math.Log(1e4) / rate * float64(time.Second))
}

func (e *Env) lastMile(t *testing.T, mode string) {
	e.script(t, "kube-proxy.sh", "mode", mode)
	e.script(t, "readyspan-node.sh", "start")
	t.Cleanup(func() { e.script(t, "readyspan-node.sh", "stop") })
	Eventually(t, time.Minute, "readyspan node's heartbeat reaching readyspan", func() (bool, error) {
		n, err := readyspanMetric(`readyspan_otlp_joined_spans_total{component="readyspan-node"}`)
		return n > 0, fmt.Errorf("joined spans of readyspan-node = %v (%v)", n, err)
	})

	ns := e.Namespace(t, "e2e-lastmile-"+mode)
	ctx := Ctx(t)
	e.createService(t, ns, service("web"))
	svc, err := e.Kube.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := startProber(t, net.JoinHostPort(svc.Spec.ClusterIP, "80"))
	names := e.watchPodNames(t, ns)

	d := webDeployment("web", 3)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = int64p(8) // httpd answers until removed from the rules, then killed
	e.createDeployment(t, ns, d)
	e.WaitPodsReady(t, ns, "app=web", 3, 2*time.Minute)

	// Rolling update 1 replaces the first Pods, which have no preStop hook, with Pods that sleep
	// 3 s in one; rolling update 2 replaces those.
	noHook := e.rollWeb(t, ns, `{"spec":{"template":{"metadata":{"annotations":{"e2e/rev":"2"}},"spec":{"containers":[{"name":"httpd","lifecycle":{"preStop":{"sleep":{"seconds":3}}}}]}}}}`)
	sleep := e.rollWeb(t, ns, `{"spec":{"template":{"metadata":{"annotations":{"e2e/rev":"3"}}}}}`)
	time.Sleep(2 * time.Second) // the last old Pods' removal reaches the prober
	p.stop()
	rate := p.rate()
	if rate < 100 {
		t.Fatalf("the prober reached %.0f answers a second from %s (%d errors), want at least 100", rate, svc.Spec.ClusterIP, p.errors)
	}
	reach := proberReach(4, rate)
	t.Logf("prober: %.0f answers a second, %d errors; one Pod of 4 reached within %v", rate, p.errors, reach)

	// New Pods: every Pod the namespace had, except the first three when they are old Pods only.
	uids := names.uids()
	traces := e.WaitTraces(t, uids, 3*time.Minute, func(tr *Trace) bool { return tr.Find("status.programming") != nil })
	var firstAfter, lastBefore []time.Duration // for the log: how the prober saw the stamps
	defer func() {
		t.Logf("first answer − programmed: %s; removed − last answer: %s", spread(firstAfter), spread(lastBefore))
	}()
	for uid, tr := range traces {
		name := names.name(uid)
		sp := tr.Find("status.programming")
		first, ok := p.first(name)
		if !ok {
			t.Errorf("%s: the prober never reached it", name)
			continue
		}
		end := sp.EndTime()
		firstAfter = append(firstAfter, first.Sub(end))
		if first.Before(end.Add(-lastMilePrecision)) || first.After(end.Add(lastMilePrecision+reach)) {
			t.Errorf("%s: programmed at %s, first answered at %s (%+v): not within [−%v, +%v]", name, end.Format(time.StampMicro),
				first.Format(time.StampMicro), first.Sub(end), lastMilePrecision, lastMilePrecision+reach)
		}
		if sp.IsError() {
			t.Errorf("%s: status.programming is an error: %s", name, sp.StatusMessage())
		}
	}

	for _, c := range []struct {
		rollout *Trace
		late    bool
	}{{noHook, true}, {sleep, false}} {
		rots := c.rollout.FindAll("rollout.pod.rotation")
		if len(rots) != 3 {
			t.Errorf("%d rollout.pod.rotation spans, want one per old Pod (3)", len(rots))
		}
		for _, sp := range rots {
			name := sp.StrTag("k8s.pod.name")
			last, ok := p.last(name)
			if !ok {
				t.Errorf("%s: the prober never reached it", name)
				continue
			}
			removed := sp.EndTime()
			lastBefore = append(lastBefore, removed.Sub(last))
			if last.After(removed.Add(lastMilePrecision)) || last.Before(removed.Add(-lastMilePrecision-reach)) {
				t.Errorf("%s: out of the rules at %s, last answered at %s (%+v)", name, removed.Format(time.StampMicro),
					last.Format(time.StampMicro), last.Sub(removed))
			}
			deleted := sp.StartTime()
			late, _ := sp.Tag("readyspan.pod.rotation.late")
			if c.late {
				if fmt.Sprint(late) != "1" || !sp.IsError() || !last.After(deleted) {
					t.Errorf("%s: late %v, error %v, last answer %+v after its deletion: want in rotation after its stop, answering after its deletion",
						name, late, sp.IsError(), last.Sub(deleted))
				}
			} else if fmt.Sprint(late) != "0" || sp.IsError() || last.After(deleted.Add(3*time.Second)) {
				t.Errorf("%s: late %v, error %v, last answer %+v after its deletion: want out of rotation before its stop (3 s)",
					name, late, sp.IsError(), last.Sub(deleted))
			}
		}
		sentence := c.rollout.Find("workload.rollout").StrTag("readyspan.rollout.summary")
		if says := strings.Contains(sentence, "after it was told to stop"); says != c.late {
			t.Errorf("sentence %q: names old Pods in rotation after their stop = %v, want %v", sentence, says, c.late)
		}
	}
}

// rollWeb patches the Deployment, waits for the rollout's trace and returns it.
func (e *Env) rollWeb(t *testing.T, ns, patch string) *Trace {
	t.Helper()
	updated, err := e.Kube.AppsV1().Deployments(ns).Patch(Ctx(t), "web", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return e.rolloutTrace(t, "Deployment", ns, "web", updated.Generation, 3*time.Minute)
}

// script runs one of deploy/local/scripts with arguments, failing the test on error.
func (e *Env) script(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.Root, "deploy/local/scripts", name), args...)
	cmd.Dir = e.Root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s: %s", name, strings.Join(args, " "), bytes.TrimSpace(out))
}

// readyspanMetric reads one sample of the local readyspan's /metrics by its full name and labels.
func readyspanMetric(series string) (float64, error) {
	resp, err := http.Get("http://127.0.0.1:8080/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, sc.Err()
}

// podNames remembers the name of every Pod a namespace had, by UID.
type podNames struct {
	mu    sync.Mutex
	names map[string]string
}

func (e *Env) watchPodNames(t *testing.T, ns string) *podNames {
	pn := &podNames{names: map[string]string{}}
	w, err := e.Kube.CoreV1().Pods(ns).Watch(Ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				pn.mu.Lock()
				pn.names[string(p.UID)] = p.Name
				pn.mu.Unlock()
			}
		}
	}()
	return pn
}

func (pn *podNames) uids() []string {
	pn.mu.Lock()
	defer pn.mu.Unlock()
	var out []string
	for uid := range pn.names {
		out = append(out, uid)
	}
	return out
}

func (pn *podNames) name(uid string) string {
	pn.mu.Lock()
	defer pn.mu.Unlock()
	return pn.names[uid]
}

// prober opens a connection to a Service's ClusterIP from each worker every proberInterval and
// records, per Pod name in the answer, the first and last moment a connection it answered was
// opened (the rules pick the Pod when the connection's first packet leaves).
type prober struct {
	addr       string
	began, end time.Time
	done       chan struct{}
	wg         sync.WaitGroup
	mu         sync.Mutex
	firsts     map[string]time.Time
	lasts      map[string]time.Time
	ok, errors int
}

func startProber(t *testing.T, addr string) *prober {
	p := &prober{addr: addr, began: time.Now(), done: make(chan struct{}), firsts: map[string]time.Time{}, lasts: map[string]time.Time{}}
	for range proberWorkers {
		p.wg.Add(1)
		go p.work()
	}
	t.Cleanup(p.stop)
	return p
}

func (p *prober) work() {
	defer p.wg.Done()
	tick := time.NewTicker(proberInterval)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-tick.C:
		}
		at := time.Now()
		name, err := p.ask()
		p.mu.Lock()
		if err != nil {
			p.errors++
		} else {
			p.ok++
			if _, seen := p.firsts[name]; !seen {
				p.firsts[name] = at
			}
			if at.After(p.lasts[name]) {
				p.lasts[name] = at
			}
		}
		p.mu.Unlock()
	}
}

// ask opens one connection and reads the Pod's name from "hello from NAME".
func (p *prober) ask() (string, error) {
	c, err := net.DialTimeout("tcp", p.addr, 300*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(c, 4096))
	if err != nil {
		return "", err
	}
	_, body, _ := bytes.Cut(b, []byte("\r\n\r\n"))
	name, ok := strings.CutPrefix(strings.TrimSpace(string(body)), "hello from ")
	if !ok {
		return "", fmt.Errorf("answer %q", body)
	}
	return name, nil
}

func (p *prober) stop() {
	select {
	case <-p.done:
		return
	default:
		close(p.done)
	}
	p.wg.Wait()
	p.end = time.Now()
}

// rate is the answers a second the prober got, over its run.
func (p *prober) rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return float64(p.ok) / p.end.Sub(p.began).Seconds()
}

func (p *prober) first(name string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.firsts[name]
	return at, ok
}

func (p *prober) last(name string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.lasts[name]
	return at, ok
}

// spread is "min / median / max (n)" of durations, in ms.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	slices.Sort(ds)
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) }
	return fmt.Sprintf("%s / %s / %s ms (%d)", ms(ds[0]), ms(ds[len(ds)/2]), ms(ds[len(ds)-1]), len(ds))
}
