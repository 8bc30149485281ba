package tracer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// probesHooksDir is a capture from the local cluster's real node (readyspan record of a
// namespace): a Pod with a startup probe that passes after 4 s (startup), one whose liveness
// probe fails until its container is restarted once (liveness), two with a postStart hook of 3 s
// (poststart, followed by a second container; poststart-last, alone) and one whose postStart hook
// fails after 2 s, again at each restart (poststart-fails). Beside the recording, the evidence
// readyspan never reads: the kubelet's own spans of its CRI calls for each Pod, as it exported
// them to Jaeger (kubelet-cri-spans.jsonl: method, start and end in µs), and what the containers
// and their hooks logged with the node's clock in µs (container-logs.txt).
var probesHooksDir = filepath.Join("testdata", "real-node", "probes-hooks")

type criSpan struct {
	Pod   string `json:"pod"`
	Name  string `json:"name"`
	Start int64  `json:"start_us"`
	End   int64  `json:"end_us"`
}

func (s criSpan) start() time.Time { return time.UnixMicro(s.Start) }
func (s criSpan) end() time.Time   { return time.UnixMicro(s.End) }

// criSpansOf reads the kubelet's CRI spans of the capture, by Pod, in start order.
func criSpansOf(t *testing.T) map[string][]criSpan {
	t.Helper()
	f, err := os.Open(filepath.Join(probesHooksDir, "kubelet-cri-spans.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]criSpan{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var s criSpan
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		s.Name = strings.TrimPrefix(s.Name, "runtime.v1.RuntimeService/")
		out[s.Pod] = append(out[s.Pod], s)
	}
	return out
}

// containerLog is the time a container (or its hook) logged a word ("hook-end"), from
// container-logs.txt: `pod.container[.previous] word seconds microseconds`.
func containerLog(t *testing.T, who, word string) time.Time {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(probesHooksDir, "container-logs.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == who && f[1] == word {
			s, err1 := strconv.ParseInt(f[2], 10, 64)
			us, err2 := strconv.ParseInt(f[3], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("bad log line %q", line)
			}
			return time.Unix(s, us*1000)
		}
	}
	t.Fatalf("no %q logged by %s", word, who)
	return time.Time{}
}

// nth is the n-th (from 0) CRI call of a method at or after from.
func nth(spans []criSpan, method string, from time.Time, n int) (criSpan, bool) {
	for _, s := range spans {
		if s.Name == method && !s.start().Before(from) {
			if n == 0 {
				return s, true
			}
			n--
		}
	}
	return criSpan{}, false
}

// TestRealNodeProbesHooks replays the capture (golden output beside it) and judges the startup
// probe, the liveness restart and the postStart hooks against the kubelet's own CRI spans and
// the containers' logs. Tolerances: an event readyspan places a boundary at is stamped by the
// kubelet between the CRI call it follows and the one after it (1 ms either side, as
// TestKubeletSpansAgree in the e2e suite); a watch time is an upper bound, later by the status
// write and the watch (here 23–103 ms), bounded at 1 s.
func TestRealNodeProbesHooks(t *testing.T) {
	traces := replayDir(t, probesHooksDir)
	spans, waterfall := render(t, traces)
	golden(t, probesHooksDir+".txtar", spans, waterfall)
	byPod := map[string]*phases.Trace{}
	for _, tr := range traces {
		checkShape(t, tr)
		byPod[tr.Pod.Name] = tr
	}
	cri := criSpansOf(t)
	const eventSlack, watchBound = time.Millisecond, time.Second
	find := func(t *testing.T, tr *phases.Trace, path string) *phases.Span {
		t.Helper()
		s := tr.Find(path)
		if s == nil {
			t.Fatalf("no %s span", path)
		}
		return s
	}
	within := func(t *testing.T, what string, got, from, to time.Time) {
		t.Helper()
		t.Logf("%s: %s, kubelet [%s, %s] (%+v after the first)", what, got.Format("15:04:05.000000"), from.Format("15:04:05.000000"), to.Format("15:04:05.000000"), got.Sub(from))
		if got.Before(from) || got.After(to) {
			t.Errorf("%s %s is outside [%s, %s]", what, got.Format("15:04:05.000000"), from.Format("15:04:05.000000"), to.Format("15:04:05.000000"))
		}
	}

	t.Run("poststart followed by a container", func(t *testing.T) {
		tr, calls := byPod["poststart"], cri["poststart"]
		hook, ok := nth(calls, "ExecSync", time.Time{}, 0)
		next, ok2 := nth(calls, "CreateContainer", hook.end(), 0)
		if !ok || !ok2 {
			t.Fatalf("the capture lacks the hook's ExecSync or the next CreateContainer: %v", calls)
		}
		started, _ := nth(calls, "StartContainer", time.Time{}, 0)
		ps := find(t, tr, "container/hooked/post_start")
		// Started is emitted after StartContainer returned, before the hook's exec.
		within(t, "post_start start", ps.Start, started.end().Add(-eventSlack), hook.start().Add(eventSlack))
		// The kubelet turns to the next container as soon as the hook returns: its first
		// event (Pulled) ends the hook, before that container's CreateContainer.
		within(t, "post_start end", ps.End, hook.end().Add(-eventSlack), next.start().Add(eventSlack))
		within(t, "the hook's own log of its end", containerLog(t, "poststart.hooked", "hook-end"), hook.start(), hook.end())
		if after := find(t, tr, "container/after"); !after.Start.Equal(ps.End) {
			t.Errorf("the next container's turn starts at %s, not at the hook's end %s", after.Start.Format(time.StampMicro), ps.End.Format(time.StampMicro))
		}
	})

	t.Run("poststart of the last container", func(t *testing.T) {
		tr, calls := byPod["poststart-last"], cri["poststart-last"]
		hook, ok := nth(calls, "ExecSync", time.Time{}, 0)
		if !ok {
			t.Fatalf("no ExecSync: %v", calls)
		}
		started, _ := nth(calls, "StartContainer", time.Time{}, 0)
		ps := find(t, tr, "container/hooked/post_start")
		within(t, "post_start start", ps.Start, started.end().Add(-eventSlack), hook.start().Add(eventSlack))
		// Nothing stamps its end: the first status with the container running bounds it.
		within(t, "post_start end (a watch time)", ps.End, hook.end(), hook.end().Add(watchBound))
		if ps.Attr(phases.AttrSourceEnd) != phases.SourceWatch.String() {
			t.Errorf("post_start ends on %v, want the watch time", ps.Attr(phases.AttrSourceEnd))
		}
	})

	t.Run("poststart that fails", func(t *testing.T) {
		tr, calls := byPod["poststart-fails"], cri["poststart-fails"]
		hook, ok := nth(calls, "ExecSync", time.Time{}, 0)
		stop, ok2 := nth(calls, "StopContainer", hook.end(), 0)
		if !ok || !ok2 {
			t.Fatalf("no ExecSync and StopContainer after it: %v", calls)
		}
		ps := find(t, tr, "container/hooked/post_start")
		// FailedPostStartHook is emitted when the exec returned, before the kill.
		within(t, "post_start end (FailedPostStartHook)", ps.End, hook.end().Add(-eventSlack), stop.start().Add(eventSlack))
		if ps.Status != phases.StatusError || ps.StatusMessage != "FailedPostStartHook" {
			t.Errorf("post_start status %v %q, want an error naming FailedPostStartHook", ps.Status, ps.StatusMessage)
		}
		rs := find(t, tr, "container/hooked/restart")
		within(t, "restart start (Killing)", rs.Start, hook.end().Add(-eventSlack), stop.start().Add(eventSlack))
		if rs.Attr(phases.AttrRestartReason) != "postStart hook failed" {
			t.Errorf("restart reason %v", rs.Attr(phases.AttrRestartReason))
		}
	})

	t.Run("liveness restart", func(t *testing.T) {
		tr, calls := byPod["liveness"], cri["liveness"]
		stop, ok := nth(calls, "StopContainer", time.Time{}, 0)
		again, ok2 := nth(calls, "StartContainer", stop.end(), 0)
		if !ok || !ok2 {
			t.Fatalf("no StopContainer and StartContainer after it: %v", calls)
		}
		rs := find(t, tr, "container/app/restart")
		// Killing is emitted by the kubelet's killContainer just before StopContainer, after
		// the third failed liveness exec.
		lastProbe := criSpan{}
		for _, s := range calls {
			if s.Name == "ExecSync" && s.End <= stop.Start {
				lastProbe = s
			}
		}
		within(t, "restart start (Killing)", rs.Start, lastProbe.end(), stop.start().Add(eventSlack))
		// It ends when the second run is seen running: after the runtime started it.
		within(t, "restart end (a watch time)", rs.End, again.end(), again.end().Add(watchBound))
		// The second run's own first line comes after the runtime started it (not a bound on
		// the watch time: the shell logs after the status may have been written).
		within(t, "the second run's own log", containerLog(t, "liveness.app", "second-run"), again.start(), again.end().Add(watchBound))
		if rs.Attr(phases.AttrRestartReason) != "liveness probe failed" || rs.Attr(phases.AttrRestarts) != int64(1) {
			t.Errorf("restart attributes %v", rs.Attrs)
		}
		// Ready came after the restart: readiness is the second run's.
		rd := find(t, tr, "container/app/readiness")
		if !rd.Start.Equal(rs.End) {
			t.Errorf("readiness starts at %s, not at the restart's end %s", rd.Start.Format(time.StampMicro), rs.End.Format(time.StampMicro))
		}
		if tr.Summary.Outcome != phases.OutcomeReady {
			t.Errorf("outcome %s", tr.Summary.Outcome)
		}
	})

	t.Run("startup probe", func(t *testing.T) {
		tr, calls := byPod["startup"], cri["startup"]
		start, ok := nth(calls, "StartContainer", time.Time{}, 0)
		if !ok {
			t.Fatalf("no StartContainer: %v", calls)
		}
		sp := find(t, tr, "container/app/startup_probe")
		within(t, "startup_probe start (Started)", sp.Start, start.end().Add(-eventSlack), start.end().Add(5*time.Millisecond))
		// The probe passes at its first run (every second) after the container made its file;
		// the status that says so is a watch time after that.
		made := containerLog(t, "startup.app", "started-file")
		within(t, "startup_probe end (a watch time)", sp.End, made, made.Add(time.Second+watchBound))
		var passed time.Time
		for _, s := range calls {
			if s.Name == "ExecSync" && s.start().After(made) {
				passed = s.end()
				break
			}
		}
		if passed.IsZero() {
			t.Fatal("no probe exec after the file was made")
		}
		within(t, "startup_probe end vs the passing exec", sp.End, passed, passed.Add(watchBound))
	})
}
