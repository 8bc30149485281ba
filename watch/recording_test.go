package watch_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/readyspan/readyspan/internal/captures"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/tracer"
	"github.com/readyspan/readyspan/watch"
)

// insertLine puts line before the n-th (1-based) line of a JSON lines file.
func insertLine(n int, line string) func([]byte) []byte {
	return func(b []byte) []byte {
		lines := strings.SplitAfter(string(b), "\n")
		out := append([]string{}, lines[:n-1]...)
		out = append(out, line+"\n")
		return []byte(strings.Join(append(out, lines[n-1:]...), ""))
	}
}

// editLine rewrites the n-th (1-based) line of a JSON lines file: f gets the watch event.
func editLine(t *testing.T, n int, f func(ev map[string]any)) func([]byte) []byte {
	return func(b []byte) []byte {
		lines := strings.SplitAfter(string(b), "\n")
		var ev map[string]any
		if err := json.Unmarshal([]byte(lines[n-1]), &ev); err != nil {
			t.Fatal(err)
		}
		f(ev)
		out, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		lines[n-1] = string(out) + "\n"
		return []byte(strings.Join(lines, ""))
	}
}

func metadataOf(ev map[string]any) map[string]any {
	return ev["object"].(map[string]any)["metadata"].(map[string]any)
}

// traceDigest is what a replay decided for each Pod, to compare two replays.
func traceDigest(traces []*phases.Trace) string {
	var b strings.Builder
	for _, tr := range traces {
		root := tr.Root()
		fmt.Fprintf(&b, "%s %s/%s %s %s %d spans\n", tr.TraceID, tr.Pod.Namespace, tr.Pod.Name, root.Start, root.End, len(tr.Spans))
	}
	return b.String()
}

func replayDeltas(deltas []watch.Delta) []*phases.Trace {
	var traces []*phases.Trace
	tracer.Replay(tracer.New(tracer.Config{Backfill: true}, tracer.SinkFunc(func(tr *phases.Trace) { traces = append(traces, tr) }), nil, nil), deltas)
	return traces
}

// safeText tells whether s is one line that cannot drive a terminal: no control bytes (C0, DEL,
// C1), no invalid UTF-8, no bidi overrides.
func safeText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			return false
		}
	}
	return true
}

// A line longer than bufio.Scanner's old 16 MiB cap is read like any other, and the lines after
// it are not lost: run8 with a 17 MiB annotation on its first Pod replays to the same traces.
func TestLoadRecordingLongLine(t *testing.T) {
	const padding = 17 << 20
	dir := captures.Copy(t, "run8-slow-pull-watch", map[string]func([]byte) []byte{
		"watch.pods.jsonl": editLine(t, 1, func(ev map[string]any) {
			md := metadataOf(ev)
			ann, _ := md["annotations"].(map[string]any)
			if ann == nil {
				ann = map[string]any{}
			}
			ann["readyspan.test/padding"] = strings.Repeat("x", padding)
			md["annotations"] = ann
		}),
	})
	if fi, err := os.Stat(filepath.Join(dir, "watch.pods.jsonl")); err != nil || fi.Size() < padding {
		t.Fatalf("the padded file is not over %d bytes: %v", padding, err)
	}
	want, err := tracer.Kinds.LoadRecording(captures.Path("run8-slow-pull-watch"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tracer.Kinds.LoadRecording(dir)
	if err != nil {
		t.Fatalf("a long line is not an error: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("loaded %d deltas, want %d", len(got), len(want))
	}
	if g, w := traceDigest(replayDeltas(got)), traceDigest(replayDeltas(want)); g != w {
		t.Fatalf("traces differ from the capture's:\n%s\nwant:\n%s", g, w)
	}
}

// A line over the hard limit is skipped alone, counted with its place, and the lines after it
// load.
func TestLoadRecordingLineOverLimit(t *testing.T) {
	watch.SetMaxLineBytes(t, 1<<20)
	huge := `{"type":"ADDED","object":{"metadata":{"name":"` + strings.Repeat("y", 3<<20) + `"}}}`
	dir := captures.Copy(t, "run8-slow-pull-watch", map[string]func([]byte) []byte{
		"watch.pods.jsonl": insertLine(3, huge),
	})
	// And in an audit log too, at its end without a line end.
	if err := os.WriteFile(filepath.Join(dir, "audit.jsonl"), []byte("\n"+huge), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := tracer.Kinds.LoadRecording(captures.Path("run8-slow-pull-watch"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tracer.Kinds.LoadRecording(dir)
	var le *watch.LoadError
	if !errors.As(err, &le) || len(le.Problems) != 2 {
		t.Fatalf("want a watch.LoadError with 2 problems, got %v", err)
	}
	for i, wantPlace := range []string{filepath.Join(dir, "watch.pods.jsonl") + ":3: ", filepath.Join(dir, "audit.jsonl") + ":2: "} {
		if p := le.Problems[i].String(); !strings.HasPrefix(p, wantPlace) || !strings.Contains(p, "over the limit of 1 MiB") {
			t.Errorf("problem %q: want it at %s, over the limit", p, wantPlace)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("loaded %d deltas, want every other line (%d)", len(got), len(want))
	}
	t.Log(err)
}

// Objects of the wrong kind for their stream, and objects without a UID, are refused with
// their place, counted, and make no trace: JSON decodes any object into a Pod, and without
// this a Node became Pod "/x" traced under the ID of the empty UID.
func TestLoadRecordingRefusesWrongObjects(t *testing.T) {
	coreEvent, err := os.ReadFile(filepath.Join(captures.Path("run8-slow-pull-watch"), "watch.events.core.v1.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	firstCoreEvent := strings.TrimSpace(strings.SplitAfter(string(coreEvent), "\n")[0])
	tests := []struct {
		name    string
		capture string
		file    string
		edit    func([]byte) []byte
		place   string // where the problem is, after the directory
		want    string
	}{
		{
			name: "node in pods", capture: "run8-slow-pull-watch", file: "watch.pods.jsonl",
			edit:  insertLine(3, `{"type":"ADDED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"x","uid":"0b1e0b1e-0000-4000-8000-000000000001"}}}`),
			place: "watch.pods.jsonl:3: ", want: `a "Node" object in the pods stream, which holds Pods`,
		},
		{
			name: "pod without uid", capture: "run8-slow-pull-watch", file: "watch.pods.jsonl",
			edit:  editLine(t, 2, func(ev map[string]any) { delete(metadataOf(ev), "uid") }),
			place: "watch.pods.jsonl:2: ", want: "a Pod without metadata.uid",
		},
		{
			name: "node without kind or uid in pods", capture: "run8-slow-pull-watch", file: "watch.pods.jsonl",
			edit:  insertLine(5, `{"type":"MODIFIED","object":{"metadata":{"name":"x"},"spec":{"podCIDR":"10.0.0.0/24"}}}`),
			place: "watch.pods.jsonl:5: ", want: "a Pod without metadata.uid",
		},
		{
			name: "core event in events.k8s.io", capture: "run8-slow-pull-watch", file: "watch.events.events.k8s.io.v1.jsonl",
			edit:  insertLine(1, firstCoreEvent),
			place: "watch.events.events.k8s.io.v1.jsonl:1: ", want: `apiVersion "v1" in the events.events.k8s.io.v1 stream, which holds Events of events.k8s.io`,
		},
		{
			name: "node in a pod list", capture: "run2-ifnotpresent", file: "pods.json",
			edit: func(b []byte) []byte {
				var list map[string]any
				if err := json.Unmarshal(b, &list); err != nil {
					t.Fatal(err)
				}
				list["items"] = append(list["items"].([]any), map[string]any{"kind": "Node", "metadata": map[string]any{"name": "x", "uid": "n"}})
				b, _ = json.Marshal(list)
				return b
			},
			place: "pods.json: items[2]: ", want: `a "Node" object in the pods stream, which holds Pods`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, err := tracer.Kinds.LoadRecording(captures.Path(tt.capture))
			if err != nil {
				t.Fatal(err)
			}
			dir := captures.Copy(t, tt.capture, map[string]func([]byte) []byte{tt.file: tt.edit})
			got, err := tracer.Kinds.LoadRecording(dir)
			var le *watch.LoadError
			if !errors.As(err, &le) || len(le.Problems) != 1 {
				t.Fatalf("want a watch.LoadError with 1 problem, got %v", err)
			}
			if p := le.Problems[0].String(); p != filepath.Join(dir, tt.place)+tt.want {
				t.Fatalf("problem %q, want %q", p, filepath.Join(dir, tt.place)+tt.want)
			}
			wantN := len(want)
			if tt.name == "pod without uid" {
				wantN-- // the refused line was one of the capture's own
			}
			if len(got) != wantN {
				t.Fatalf("loaded %d deltas, want %d", len(got), wantN)
			}
			for _, tr := range replayDeltas(got) {
				if tr.Pod.UID == "" || tr.Pod.Namespace == "" || tr.Pod.Name == "x" {
					t.Errorf("a trace for a refused object: %s/%s uid %q", tr.Pod.Namespace, tr.Pod.Name, tr.Pod.UID)
				}
			}
			t.Log(err)
		})
	}
}

// A directory of garbage, or of empty files, is not a recording with nothing in it: it is an
// error that says what was found. What it quotes of the garbage is bounded and escaped.
func TestLoadRecordingNotARecording(t *testing.T) {
	hostile := "\x1b]0;TITLE\x07\x1b[2J\u202e" + strings.Repeat("z", 1<<20) + "\r\n"
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{
			name: "garbage",
			files: map[string]string{
				"watch.pods.jsonl":        hostile + strings.Repeat("not json\n", 6),
				"watch.replicasets.jsonl": strings.Repeat("{\"type\":\"SURPRISE\"}\n", 7),
				"deployments.json":        "<html>nope</html>",
			},
			want: []string{
				"is not a readyspan recording: found ",
				"deployments.json (not a List)",
				"watch.replicasets.jsonl (7 lines, none a watch event)",
				"watch.pods.jsonl (7 lines, none a watch event)",
				"first: ",
			},
		},
		{
			name:  "empty files",
			files: map[string]string{"watch.pods.jsonl": "", "watch.events.core.v1.jsonl": "\n\n", "replicasets.json": ""},
			want:  []string{"is not a readyspan recording: found ", "watch.pods.jsonl (empty)", "watch.events.core.v1.jsonl (empty)", "replicasets.json (empty)"},
		},
		{
			name:  "no stream files",
			files: map[string]string{"notes.txt": "hello"},
			want:  []string{"is not a readyspan recording: no watch.<stream>.jsonl or <stream>.json files"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			deltas, err := tracer.Kinds.LoadRecording(dir)
			if err == nil {
				t.Fatalf("no error, %d deltas", len(deltas))
			}
			var le *watch.LoadError
			if errors.As(err, &le) {
				t.Fatalf("a partial recording (%v), want an error that this is no recording", err)
			}
			msg := err.Error()
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q: want it to say %q", msg, w)
				}
			}
			if !strings.HasPrefix(msg, dir+" is not a readyspan recording: ") {
				t.Errorf("error %q: want it to start with the directory", msg)
			}
			if !safeText(msg) || len(msg) > 1000 {
				t.Errorf("error of %d bytes is not short printable text: %q", len(msg), msg[:min(len(msg), 300)])
			}
			t.Log(msg)
		})
	}
}

// Whatever a bad line holds, the problem that quotes it is one bounded line of printable text.
func TestLoadRecordingProblemsAreSafe(t *testing.T) {
	evil := "\x1b]0;TITLE\x07\x1b[2J\x1b[H\u202e\u2066\x9b\xff\rOVERWRITE" + strings.Repeat("\x1b", 4096)
	lines := []string{
		`{"type":"ADDED","object":{"metadata":{"name":"p","namespace":"d","uid":"u1","resourceVersion":"1"}}}`,
		evil,
		`{"type":` + strconvQuote(evil) + `,"object":{}}`,
		`{"type":"ADDED","object":{"kind":` + strconvQuote(evil) + `,"metadata":{"uid":"u2"}}}`,
		`{"type":"ADDED","object":{"apiVersion":` + strconvQuote(evil) + `,"metadata":{"uid":"u3"}}}`,
		`{"type":"ADDED","object":{"metadata":{"uid":"u4"}},"recv":` + strconvQuote(evil) + `}`,
		`{"type":"ADDED","object":{"metadata":{"uid":"u5","creationTimestamp":` + strconvQuote(evil) + `}}}`,
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "watch.pods.jsonl"), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "audit.jsonl"), []byte(evil+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deltas, err := tracer.Kinds.LoadRecording(dir)
	var le *watch.LoadError
	if !errors.As(err, &le) || len(le.Problems) != len(lines) || len(deltas) != 1 {
		t.Fatalf("got %d deltas, error %v; want 1 delta and %d problems", len(deltas), err, len(lines))
	}
	for _, p := range le.Problems {
		if s := p.String(); !safeText(s) || len(p.Why) > 6*watch.MaxQuoted+len("…") {
			t.Errorf("problem of %d bytes is not short printable text: %q", len(s), s)
		}
	}
	if s := err.Error(); !safeText(s) || len(s) > len(dir)*3+800 {
		t.Errorf("error of %d bytes is not short printable text: %q", len(s), s)
	}
	t.Log(err)
}

// strconvQuote is s as a JSON string.
func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
