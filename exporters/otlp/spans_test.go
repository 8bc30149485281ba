package otlp

import (
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/readyspan/readyspan/phases"
)

// FuzzAttributes builds OTLP requests from arbitrary names, attribute keys and values: every
// attribute of a supported type reaches the span, every string is valid UTF-8, as OTLP's
// protobuf requires (one invalid string fails the whole request), and the request marshals.
func FuzzAttributes(f *testing.F) {
	f.Add("k8s.pod.name", "web-6d4f8c7b9-x7k2p", int64(3), 1.5, true)
	f.Add("", "", int64(-1), 0.0, false)
	f.Add("message", "Back-off \xff\xfe pulling", int64(1<<62), -1e308, true)
	f.Add("名前", "ウェブ", int64(0), 0.5, false)
	f.Fuzz(func(t *testing.T, key, s string, i int64, fl float64, b bool) {
		tr := testTrace("9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f")
		sp := &tr.Spans[0]
		sp.Name, sp.Status, sp.StatusMessage = s, phases.StatusError, s
		extra := []phases.Attr{{Key: key, Value: s}, {Key: key, Value: i}, {Key: key, Value: fl}, {Key: key, Value: b}, {Key: key, Value: int(i)}}
		sp.Attrs = append(sp.Attrs, extra...)
		sp.AddEvent(phases.Event{Name: s, Time: sp.Start, Attrs: extra})
		want := len(sp.AllAttrs())
		rs := resourceSpans([]traceSpans{{tr.TraceID, tr.Spans}}, newResources(nil))
		got := flatten(rs)
		if len(got) != len(tr.Spans) {
			t.Fatalf("%d spans built from %d", len(got), len(tr.Spans))
		}
		if _, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rs}); err != nil {
			t.Fatalf("the request does not marshal: %v", err)
		}
		root := got[0]
		if n := len(root.Attributes); n != want {
			t.Fatalf("%d attributes on the span, want %d", n, want)
		}
		check := func(what, v string) {
			if !utf8.ValidString(v) {
				t.Fatalf("%s is not valid UTF-8: %q", what, v)
			}
		}
		check("name", root.Name)
		check("status", root.Status.GetMessage())
		for _, e := range root.Events {
			check("event name", e.Name)
			for _, kv := range e.Attributes {
				check("event attribute key", kv.Key)
				check("event attribute", kv.GetValue().GetStringValue())
			}
		}
		for _, kv := range root.Attributes {
			check("attribute key", kv.Key)
			check("attribute", kv.GetValue().GetStringValue())
		}
	})
}

// TestInvalidUTF8ReachesTheBackend sends a trace holding invalid UTF-8 to a real OTLP/HTTP
// client: before validUTF8, the request failed to marshal ("string field contains invalid
// UTF-8") and the batch was retried until dropped.
func TestInvalidUTF8ReachesTheBackend(t *testing.T) {
	var bodies int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		bodies++
	}))
	defer srv.Close()
	client := otlptracehttp.NewClient(otlptracehttp.WithEndpointURL(srv.URL + "/v1/traces"))
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr := testTrace("9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f")
	tr.Spans[0].Attrs = append(tr.Spans[0].Attrs, phases.Attr{Key: "message", Value: "exit \xff\xfe"})
	tr.Spans[0].AddEvent(phases.Event{Name: "Failed \xc3", Time: tr.Spans[0].Start})
	if err := client.UploadTraces(context.Background(), resourceSpans([]traceSpans{{tr.TraceID, tr.Spans}}, newResources(nil))); err != nil {
		t.Fatalf("export: %v", err)
	}
	if bodies != 1 {
		t.Fatalf("backend got %d requests, want 1", bodies)
	}
}

// TestEndpointThatIsNotOTLP points the exporter at a plain HTTP server: each export fails with
// a one-line error that names the status, and the exporter counts it and keeps the trace.
func TestEndpointThatIsNotOTLP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>404 page not found</html>", http.StatusNotFound)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"http", Config{Protocol: "http", Endpoint: srv.URL, Insecure: true}, "404"},
		{"grpc", Config{Protocol: "grpc", Endpoint: strings.TrimPrefix(srv.URL, "http://"), Insecure: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, err := newClient(context.Background(), tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5e9)
			defer cancel()
			tr := testTrace("9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f")
			err = client.UploadTraces(ctx, resourceSpans([]traceSpans{{tr.TraceID, tr.Spans}}, newResources(nil)))
			if err == nil {
				t.Fatal("export to a server that is not OTLP succeeded")
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q: want one line containing %q", msg, tc.want)
			}
			t.Logf("%s: %v", tc.name, err)
		})
	}
}

// TestResourcesSayTheShard: every span's resource names its service and what is said of the
// exporting process (a shard's readyspan.shard).
func TestResourcesSayTheShard(t *testing.T) {
	res := newResources(map[string]string{"readyspan.shard": "1/2"})
	for _, service := range []string{"kubelet", "kube-scheduler"} {
		attrs := map[string]string{}
		for _, kv := range res.get(service).GetAttributes() {
			attrs[kv.Key] = kv.GetValue().GetStringValue()
		}
		if attrs["service.name"] != service || attrs["readyspan.shard"] != "1/2" {
			t.Errorf("resource of %s: %v", service, attrs)
		}
	}
	if got := newResources(nil).get("kubelet").GetAttributes(); len(got) != 1 {
		t.Errorf("unsharded resource: %v, want the service name only", got)
	}
}

// A component's span keeps the component's times, and they reach the request as the nearest
// time OTLP's field holds: before 1970 (the zero time among them) as 0, OTLP's "unknown"; after
// 2262-04-11 as the last nanosecond a signed 64-bit field holds; never a wrapped value that
// lands in another century.
func TestTimesOutOfRange(t *testing.T) {
	maxTime := time.Unix(0, math.MaxInt64)
	for _, c := range []struct {
		at   time.Time
		want uint64
	}{
		{time.Time{}, 0},
		{time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), 0},
		{time.Unix(-1, 0), 0},
		{time.Unix(0, 0), 0},
		{time.Unix(0, 1), 1},
		{time.Unix(1796251595, 947254000), 1796251595947254000},
		{maxTime, math.MaxInt64},
		{maxTime.Add(time.Nanosecond), math.MaxInt64},
		{time.Date(2600, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64},
		{time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), math.MaxInt64},
	} {
		tr := testTrace("9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f")
		sp := &tr.Spans[len(tr.Spans)-1]
		sp.Start, sp.End = c.at, c.at
		sp.AddEvent(phases.Event{Name: "e", Time: c.at})
		got := flatten(resourceSpans([]traceSpans{{tr.TraceID, tr.Spans}}, newResources(nil)))
		s := got[len(got)-1]
		if s.StartTimeUnixNano != c.want || s.EndTimeUnixNano != c.want || s.Events[len(s.Events)-1].TimeUnixNano != c.want {
			t.Errorf("%s sent as %d–%d, event %d; want %d", c.at, s.StartTimeUnixNano, s.EndTimeUnixNano, s.Events[len(s.Events)-1].TimeUnixNano, c.want)
		}
	}
}

// A span's bounds are readyspan's statement of where its times came from: an attribute with a
// key they state (one copied from a component's span) is not sent beside them.
func TestBoundsAreSentOnce(t *testing.T) {
	tr := testTrace("9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f")
	sp := &tr.Spans[len(tr.Spans)-1]
	sp.Attrs = append(sp.Attrs, phases.Attr{Key: phases.AttrSourceStart, Value: "audit"}, phases.Attr{Key: "k", Value: "v"})
	got := flatten(resourceSpans([]traceSpans{{tr.TraceID, tr.Spans}}, newResources(nil)))
	s := got[len(got)-1]
	var sources []string
	k := false
	for _, kv := range s.Attributes {
		if kv.Key == phases.AttrSourceStart {
			sources = append(sources, kv.GetValue().GetStringValue())
		}
		k = k || kv.Key == "k"
	}
	if want := sp.Attr(phases.AttrSourceStart); len(sources) != 1 || sources[0] != want || !k {
		t.Errorf("%s sent as %q (and k: %v); want %v once, and k", phases.AttrSourceStart, sources, k, want)
	}
}
