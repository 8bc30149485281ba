//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"errors"
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
//     after its first answer, and no earlier than 20 ms before the prober's answers from other
//     Pods since then make missing this one unlikely below 10⁻⁴: each connection lands on one of
//     at most 4 Pods in rotation at random, so 33 answers from the others in a row
//     ((3/4)³³ < 10⁻⁴) mean it was not in the rules yet. Counting the answers, not dividing by
//     the run's mean rate, holds the bound where the prober slows (a worker held by a connection
//     to a Pod on its way out, the machine's two cores busy with the rollout).
//   - Each old Pod's rollout.pod.rotation ends (the node took it out) within the same bounds of
//     its last answer, mirrored.
//   - A rolling update whose old Pods keep answering after SIGTERM (busybox httpd, PID 1, ignores
//     it) without a preStop hook has them in rotation after their stop, on the trace and in the
//     rollout's sentence, and the prober saw them answer after their deletion (at least one; and
//     each whose time in the rules after it held enough answers from the others); with
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

// proberMisses is how many answers in a row may come from the other Pods while one given Pod of
// n is in the rules, with probability at least 10⁻⁴: each connection picks one of n at random.
func proberMisses(n int) int {
	return int(math.Ceil(math.Log(1e-4) / math.Log(1-1/float64(n))))
}

func (e *Env) lastMile(t *testing.T, mode string) {
	e.script(t, "kube-proxy.sh", "mode", mode)
	e.withNodeComponent(t)

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
	sent, answered := p.rates()
	if sent < 100 {
		t.Fatalf("the prober sent %.0f requests a second to %s (%.0f answered, %d errors), want at least 100", sent, svc.Spec.ClusterIP, answered, p.errors)
	}
	misses := proberMisses(4)
	t.Logf("prober: %.0f requests a second, %.0f answered, %d errors (%s); one Pod of 4 reached within %d answers",
		sent, answered, p.errors, p.errorKinds(), misses)

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
		others := p.answersBetween(end.Add(lastMilePrecision), first)
		if first.Before(end.Add(-lastMilePrecision)) || others >= misses {
			t.Errorf("%s: programmed at %s, first answered at %s (%+v, %d answers from other Pods after the stamp + %v): want within −%v and fewer than %d",
				name, end.Format(time.StampMicro), first.Format(time.StampMicro), first.Sub(end), others, lastMilePrecision, lastMilePrecision, misses)
		}
		if sp.IsError() {
			t.Errorf("%s: status.programming is an error: %s", name, sp.StatusMessage())
		}
	}

	for _, c := range []struct {
		rollout *Trace
		late    bool
	}{{noHook, true}, {sleep, false}} {
		seenAfter := 0 // late old Pods the prober saw answer after their deletion
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
			others := p.answersBetween(last, removed.Add(-lastMilePrecision))
			if last.After(removed.Add(lastMilePrecision)) || others >= misses {
				t.Errorf("%s: out of the rules at %s, last answered at %s (%+v, then %d answers from other Pods until the stamp − %v): want within +%v and fewer than %d",
					name, removed.Format(time.StampMicro), last.Format(time.StampMicro), last.Sub(removed), others, lastMilePrecision, lastMilePrecision, misses)
			}
			deleted := sp.StartTime()
			late, _ := sp.Tag("readyspan.pod.rotation.late")
			if c.late {
				// A Pod that left the rules soon after its deletion may have had no answer in
				// between: the prober must have seen one only when enough answers from the other
				// Pods came before the stamp for missing it to be unlikely.
				sure := p.answersBetween(deleted, removed.Add(-lastMilePrecision)) >= misses
				if last.After(deleted) {
					seenAfter++
				}
				if fmt.Sprint(late) != "1" || !sp.IsError() || sure && !last.After(deleted) {
					t.Errorf("%s: late %v, error %v, last answer %+v after its deletion (out of the rules %+v after it): want in rotation after its stop, answering after its deletion",
						name, late, sp.IsError(), last.Sub(deleted), removed.Sub(deleted))
				}
			} else if fmt.Sprint(late) != "0" || sp.IsError() || last.After(deleted.Add(3*time.Second)) {
				t.Errorf("%s: late %v, error %v, last answer %+v after its deletion: want out of rotation before its stop (3 s)",
					name, late, sp.IsError(), last.Sub(deleted))
			}
		}
		if c.late && seenAfter == 0 {
			t.Errorf("no old Pod of %d answered the prober after its deletion, though readyspan has them in rotation after their stop", len(rots))
		}
		sentence := c.rollout.Find("workload.rollout").StrTag("readyspan.rollout.summary")
		if says := strings.Contains(sentence, "after it was told to stop"); says != c.late {
			t.Errorf("sentence %q: names old Pods in rotation after their stop = %v, want %v", sentence, says, c.late)
		}
	}
}

// withNodeComponent starts readyspan node on the node (deploy/local/scripts/readyspan-node.sh)
// until the test ends, and waits for its heartbeat to reach readyspan's OTLP input.
func (e *Env) withNodeComponent(t *testing.T) {
	t.Helper()
	e.script(t, "readyspan-node.sh", "start")
	t.Cleanup(func() { e.script(t, "readyspan-node.sh", "stop") })
	Eventually(t, time.Minute, "readyspan node's heartbeat reaching readyspan", func() (bool, error) {
		n, err := readyspanMetric(`readyspan_otlp_joined_spans_total{component="readyspan-node"}`)
		return n > 0, fmt.Errorf("joined spans of readyspan-node = %v (%v)", n, err)
	})
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
	answers    []time.Time    // when each answered connection was opened, in no order
	errorsBy   map[string]int // what the failed connections met, by the operation that failed
	ok, errors int
}

func startProber(t *testing.T, addr string) *prober {
	p := &prober{addr: addr, began: time.Now(), done: make(chan struct{}), firsts: map[string]time.Time{}, lasts: map[string]time.Time{}, errorsBy: map[string]int{}}
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
			p.errorsBy[errorKind(err)]++
		} else {
			p.ok++
			p.answers = append(p.answers, at)
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

// rates are the requests a second the prober sent and the answers a second it got, over its
// run. Requests fail while the Service has no endpoint yet (refused), so the answers' rate is the
// lower; the bounds count answers themselves.
func (p *prober) rates() (sent, answered float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	run := p.end.Sub(p.began).Seconds()
	return float64(p.ok+p.errors) / run, float64(p.ok) / run
}

// answersBetween counts the answered connections opened after from and before to.
func (p *prober) answersBetween(from, to time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.answers {
		if at.After(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// errorKinds is "kind: count, ..." of the failed connections, for the log.
func (p *prober) errorKinds() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var kinds []string
	for k, n := range p.errorsBy {
		kinds = append(kinds, fmt.Sprintf("%s: %d", k, n))
	}
	slices.Sort(kinds)
	return strings.Join(kinds, ", ")
}

// errorKind names what a failed connection met without its addresses: the operation and, for
// a timeout, that it was one.
func errorKind(err error) string {
	var op *net.OpError
	switch {
	case errors.As(err, &op) && op.Timeout():
		return op.Op + " timeout"
	case errors.As(err, &op):
		return op.Op + " " + op.Err.Error()
	default:
		return "answer"
	}
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
