package fakeapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/readyspan/readyspan/tracer"
)

func template(t *testing.T) *Template {
	t.Helper()
	tm, err := LoadTemplate(writeFixture(t), "scale-0001")
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestLoadTemplate(t *testing.T) {
	tm := template(t)
	if tm.Pods != 2 {
		t.Errorf("Pods = %d, want the unit's 2", tm.Pods)
	}
	// Deployment, Service, ReplicaSet, EndpointSlice; per Pod three changes, an Event and the
	// slice's change. Nothing of scale-0002, no Node (those are the initial state).
	if got := tm.Events(); got != 14 {
		t.Errorf("Events = %d, want 14", got)
	}
	if tm.Span != 2100*time.Millisecond {
		t.Errorf("Span = %s, want 2.1s (the last slice change)", tm.Span)
	}
	if len(tm.nodes) != 1 {
		t.Errorf("nodes = %d, want 1", len(tm.nodes))
	}
	if _, err := LoadTemplate(writeFixture(t), "nope"); err == nil {
		t.Error("a Deployment the recording does not hold: no error")
	}
}

// decoded is one generated event's object, read back.
type decoded struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name, Namespace, UID, ResourceVersion string
		CreationTimestamp                     time.Time
	} `json:"metadata"`
	InvolvedObject struct{ Name, UID string }
	EventTime      string
	Status         struct {
		Conditions []struct{ Type, Status string }
	}
}

func TestGenerate(t *testing.T) {
	tm := template(t)
	base := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := Generate(tm, Options{Rate: 4, Duration: time.Second, Base: base, ID: 7})
	if err != nil {
		t.Fatal(err)
	}
	// 4 startups/s over 1 s, 2 Pods a copy: 2 copies, the second 0.5 s after the first.
	if s.Startups != 4 || s.Len() != 28 || len(s.Pods) != 4 {
		t.Fatalf("startups %d, events %d, pods %d; want 4, 28, 4", s.Startups, s.Len(), len(s.Pods))
	}
	if s.Duration != 2600*time.Millisecond {
		t.Errorf("Duration = %s, want 2.6s", s.Duration)
	}
	seen := map[string]bool{}
	var last uint64
	for i, e := range s.events {
		var o decoded
		if err := json.Unmarshal(e.json, &o); err != nil {
			t.Fatalf("event %d: %v\n%s", i, err, e.json)
		}
		if strings.Contains(string(e.json), "scale-0001") || strings.Contains(string(e.json), "00000001-0000-4000") {
			t.Errorf("event %d still names the template's objects: %s", i, e.json)
		}
		if e.at < 0 || (i > 0 && e.at < s.events[i-1].at) {
			t.Errorf("event %d at %s: out of order", i, e.at)
		}
		rv, _ := strconv.ParseUint(o.Metadata.ResourceVersion, 10, 64)
		if rv != e.rv || rv <= last {
			t.Errorf("event %d: resourceVersion %s, want %d, increasing", i, o.Metadata.ResourceVersion, e.rv)
		}
		last = rv
		if e.key != o.Metadata.Namespace+"/"+o.Metadata.Name {
			t.Errorf("event %d: key %q, object %s/%s", i, e.key, o.Metadata.Namespace, o.Metadata.Name)
		}
		if e.typ == "ADDED" {
			if seen[o.Metadata.UID] {
				t.Errorf("event %d: UID %s added twice", i, o.Metadata.UID)
			}
			seen[o.Metadata.UID] = true
		}
		// Times move with the copy: the objects were made near base, not in the recording's past.
		if d := o.Metadata.CreationTimestamp.Sub(base); d < -2*time.Second || d > 3*time.Second {
			t.Errorf("event %d: created %s, %s from the stream's base", i, o.Metadata.CreationTimestamp, d)
		}
		if o.Kind == "Event" {
			// The hex in an Event's name is the time its recorder stamped: it must still agree
			// with the Event's own eventTime after the move.
			hex := o.Metadata.Name[strings.LastIndexByte(o.Metadata.Name, '.')+1:]
			ns, err := strconv.ParseInt(hex, 16, 64)
			et, err2 := time.Parse(time.RFC3339Nano, o.EventTime)
			if err != nil || err2 != nil || !time.Unix(0, ns).Equal(et) {
				t.Errorf("event %d: name's time %s (%v), eventTime %s (%v)", i, time.Unix(0, ns).UTC(), err, o.EventTime, err2)
			}
			if !seen[o.InvolvedObject.UID] || !strings.HasPrefix(o.Metadata.Name, o.InvolvedObject.Name+".") {
				t.Errorf("event %d is about %s %s, not a Pod of its copy", i, o.InvolvedObject.Name, o.InvolvedObject.UID)
			}
		}
	}
	for _, p := range s.Pods {
		var o decoded
		_ = json.Unmarshal(s.events[p.Ready].json, &o)
		if o.Metadata.UID != p.UID || o.Status.Conditions[0].Status != "True" {
			t.Errorf("Pod %s: its Ready event is of %s, %+v", p.UID, o.Metadata.UID, o.Status)
		}
		if !strings.Contains(string(s.events[p.Serving].json), p.UID) || p.Serving < p.Ready {
			t.Errorf("Pod %s: its serving event %d does not name it", p.UID, p.Serving)
		}
	}
	if len(s.initial) != 1 || s.initial[0].key != "/kwok-0" || s.initial[0].rv >= initialRV+1 {
		t.Errorf("initial state = %+v", s.initial)
	}
}

// serve starts a TLS server (HTTP/2, as the apiserver) for a stream of the fixture.
func serve(t *testing.T, rate float64, proto bool) (*Server, *rest.Config, *Stream) {
	t.Helper()
	return serveTemplate(t, template(t), rate, time.Second, proto)
}

func serveTemplate(t *testing.T, tm *Template, rate float64, d time.Duration, proto bool) (*Server, *rest.Config, *Stream) {
	t.Helper()
	s, err := Generate(tm, Options{Rate: rate, Duration: d, Base: time.Now(), Protobuf: proto, ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	api := NewServer(s)
	srv := httptest.NewUnstartedServer(api)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	if proto {
		cfg.ContentType = ContentProtobuf
		cfg.AcceptContentTypes = ContentProtobuf + ", " + ContentJSON
	} else {
		cfg.ContentType, cfg.AcceptContentTypes = ContentJSON, ContentJSON
	}
	return api, cfg, s
}

// TestInformer runs client-go's informers (reflector, watch list or list, the store) against
// the server: they sync on the Node of the initial state, and end holding every Pod of the
// stream Ready and every address ready, having seen each change once.
func TestInformer(t *testing.T) {
	for _, proto := range []bool{false, true} {
		t.Run(fmt.Sprintf("protobuf=%v", proto), func(t *testing.T) {
			api, cfg, s := serve(t, 8, proto)
			client := kubernetes.NewForConfigOrDie(cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			f := informers.NewSharedInformerFactory(client, 0)
			pods, slices, nodes := f.Core().V1().Pods().Informer(), f.Discovery().V1().EndpointSlices().Informer(), f.Core().V1().Nodes().Informer()
			var mu sync.Mutex
			changes := 0
			_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(any) { mu.Lock(); changes++; mu.Unlock() },
				UpdateFunc: func(any, any) { mu.Lock(); changes++; mu.Unlock() },
			})
			f.Start(ctx.Done())
			defer f.Shutdown()
			defer cancel() // before Shutdown, which waits for the informers to stop
			if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, slices.HasSynced, nodes.HasSynced) {
				t.Fatal("caches did not sync")
			}
			if n := len(nodes.GetStore().List()); n != 1 {
				t.Errorf("nodes after sync = %d, want 1", n)
			}
			if api.Delivered() {
				t.Error("Delivered before the stream started")
			}
			api.Start(ctx)
			<-api.Done()
			err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
				ready := 0
				for _, o := range pods.GetStore().List() {
					for _, c := range o.(*corev1.Pod).Status.Conditions {
						if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
							ready++
						}
					}
				}
				serving := 0
				for _, o := range slices.GetStore().List() {
					serving += len(o.(*discoveryv1.EndpointSlice).Endpoints)
				}
				return ready == len(s.Pods) && serving == len(s.Pods), nil
			})
			if err != nil {
				t.Fatalf("the informers did not catch up: %d Pods in the store", len(pods.GetStore().List()))
			}
			if !api.Delivered() {
				t.Error("the informers hold every change, but the server says it has not written them all")
			}
			want := 0
			for _, e := range s.events {
				if e.res.GVR.Resource == "pods" {
					want++
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if changes != want {
				t.Errorf("Pod changes seen = %d, want the stream's %d", changes, want)
			}
			// A plain list (a reflector's fallback, kubectl get): the state now, at the newest
			// resourceVersion, in the namespace asked.
			list, err := client.CoreV1().Pods("scale-0").List(ctx, metav1.ListOptions{})
			if err != nil || len(list.Items) != len(s.Pods) || list.ResourceVersion != strconv.FormatUint(s.events[s.Len()-1].rv, 10) {
				t.Errorf("list pods: %v, %d items at %s; want %d at %d", err, len(list.Items), list.ResourceVersion, len(s.Pods), s.events[s.Len()-1].rv)
			}
			if other, err := client.CoreV1().Pods("elsewhere").List(ctx, metav1.ListOptions{}); err != nil || len(other.Items) != 0 {
				t.Errorf("list pods in another namespace: %v, %d items", err, len(other.Items))
			}
			if leases, err := client.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{}); err != nil || len(leases.Items) != 0 {
				t.Errorf("list leases (no stream of them): %v", err)
			}
			rq := api.Requests()
			if proto && rq.Protobuf == 0 {
				t.Errorf("no request answered in protobuf: %+v", rq)
			}
			if len(rq.Unknown) > 0 {
				t.Errorf("unknown paths asked: %v", rq.Unknown)
			}
		})
	}
}

// watchLines opens a raw JSON watch and returns its decoded events as they come.
func watchLines(t *testing.T, ctx context.Context, cfg *rest.Config, query string) (int, <-chan map[string]any) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/api/v1/pods?watch=true&"+query, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan map[string]any, 1000)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		close(out)
		return resp.StatusCode, func() <-chan map[string]any {
			c := make(chan map[string]any, 1)
			c <- map[string]any{"body": string(b)}
			close(c)
			return c
		}()
	}
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var ev map[string]any
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				out <- ev
			}
		}
	}()
	return resp.StatusCode, out
}

func rvOf(ev map[string]any) uint64 {
	rv, _ := strconv.ParseUint(dig(ev, "object", "metadata", "resourceVersion").(string), 10, 64)
	return rv
}

// TestWatchSemantics holds the server to what the apiserver does for the requests a reflector
// makes: a watch resumes after the resourceVersion it names, one older than the server holds is
// 410 Gone, a streamed initial list ends with the annotated bookmark, bookmarks come when
// allowed, and timeoutSeconds ends the watch.
func TestWatchSemantics(t *testing.T) {
	api, cfg, s := serve(t, 8, false)
	api.BookmarkEvery = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	api.Start(ctx)
	<-api.Done()
	var podRVs []uint64
	for _, e := range s.events {
		if e.res.GVR.Resource == "pods" {
			podRVs = append(podRVs, e.rv)
		}
	}
	mid := podRVs[len(podRVs)/2]

	t.Run("resume", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_, evs := watchLines(t, ctx, cfg, "resourceVersion="+strconv.FormatUint(mid, 10))
		var got []uint64
		for ev := range evs {
			if ev["type"] == "MODIFIED" || ev["type"] == "ADDED" {
				got = append(got, rvOf(ev))
			}
			if len(got) == len(podRVs)-len(podRVs)/2-1 {
				break
			}
		}
		want := podRVs[len(podRVs)/2+1:]
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("events after %d = %v, want %v", mid, got, want)
		}
	})
	t.Run("gone", func(t *testing.T) {
		code, evs := watchLines(t, ctx, cfg, "resourceVersion=5")
		body := <-evs
		if code != http.StatusGone || !strings.Contains(fmt.Sprint(body["body"]), `"reason":"Expired"`) {
			t.Errorf("watch from 5: %d %v, want 410 Expired", code, body)
		}
	})
	t.Run("initial events and bookmarks", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		_, evs := watchLines(t, ctx, cfg, "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
		added, end, later := 0, false, 0
		for ev := range evs {
			switch {
			case ev["type"] == "ADDED" && !end:
				added++
			case ev["type"] == "BOOKMARK" && !end:
				end = dig(ev, "object", "metadata", "annotations", metav1.InitialEventsAnnotationKey) == "true"
				if rvOf(ev) != s.events[s.Len()-1].rv {
					t.Errorf("the initial list's bookmark is at %d, want the newest %d", rvOf(ev), s.events[s.Len()-1].rv)
				}
			case ev["type"] == "BOOKMARK":
				later++
			default:
				t.Errorf("unexpected %v", ev["type"])
			}
			if later == 2 {
				break
			}
		}
		if added != len(s.Pods) || !end || later != 2 {
			t.Errorf("initial ADDED %d (want %d), end bookmark %v, later bookmarks %d", added, len(s.Pods), end, later)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		startAt := time.Now()
		_, evs := watchLines(t, ctx, cfg, "resourceVersion="+strconv.FormatUint(s.events[s.Len()-1].rv, 10)+"&timeoutSeconds=1")
		for range evs {
		}
		if d := time.Since(startAt); d < time.Second || d > 5*time.Second {
			t.Errorf("the watch ended after %s, want about 1s", d)
		}
	})
}

// TestPacing: the server releases each event at its time from Start, never before, and keeps the
// rate: a 2.6 s stream is out in about 2.6 s.
func TestPacing(t *testing.T) {
	api, _, s := serve(t, 8, false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	begin := time.Now()
	api.Start(ctx)
	<-api.Done()
	took := time.Since(begin)
	for i, e := range s.events {
		if at := api.SentAt(i); at.Before(begin.Add(e.at)) {
			t.Errorf("event %d released at %s, before its time %s", i, at.Sub(begin), e.at)
		}
	}
	if took < s.Duration || took > s.Duration+time.Second {
		t.Errorf("the stream of %s took %s", s.Duration, took)
	}
	// Rate: copies start every Pods/rate seconds, each with the recorded timing: at 8/s a copy
	// of 2 Pods every 250 ms, 4 of them, the last ending the template's span after its start;
	// at 16/s twice the copies over the same second.
	tm := template(t)
	for _, rate := range []float64{8, 16} {
		s, _ := Generate(tm, Options{Rate: rate, Duration: time.Second, Base: time.Now()})
		copies := int(rate) / tm.Pods
		every := time.Duration(float64(time.Second) * float64(tm.Pods) / rate)
		if s.Startups != copies*tm.Pods || s.Duration != time.Duration(copies-1)*every+tm.Span {
			t.Errorf("at %g/s: %d startups over %s, want %d over %s", rate, s.Startups, s.Duration, copies*tm.Pods, time.Duration(copies-1)*every+tm.Span)
		}
	}
}

var _ = tracer.StreamPods
