//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

const criExecSync, criStopContainer = "runtime.v1.RuntimeService/ExecSync", "runtime.v1.RuntimeService/StopContainer"

// execProbe is a probe that runs cmd in the container every second.
func execProbe(cmd string, failureThreshold int32) *corev1.Probe {
	return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", cmd}}},
		PeriodSeconds: 1, FailureThreshold: failureThreshold}
}

// hook is a postStart exec hook.
func hook(cmd string) *corev1.Lifecycle {
	return &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", cmd}}}}
}

// containerSpan is the span of one of the trace's containers, by path: the container's span
// (name "container") or one of its steps ("container.post_start").
func containerSpan(t *testing.T, tr *Trace, container, name string) *Span {
	t.Helper()
	for _, s := range descendants(tr, "kubelet", name) {
		if s.StrTag("k8s.container.name") == container {
			return s
		}
	}
	t.Fatalf("no %s span of container %s (%s)", name, container, tr.Summary())
	return nil
}

// callsAfter is the first CRI call of method that starts at or after t.
func callAfter(cri map[string][]*Span, method string, t time.Time) *Span {
	for _, s := range cri[method] {
		if !s.StartTime().Before(t) {
			return s
		}
	}
	return nil
}

func abs(d int64) int64 {
	if d < 0 {
		return -d
	}
	return d
}

// within checks got ∈ [from, to] and logs where it lies.
func within(t *testing.T, what string, got, from, to time.Time) {
	t.Helper()
	t.Logf("%s: readyspan %s, kubelet [%s, %s] (%+v after the first)", what, got.Format(time.StampMicro), from.Format(time.StampMicro), to.Format(time.StampMicro), got.Sub(from))
	if got.Before(from) || got.After(to) {
		t.Errorf("%s %s is outside [%s, %s]", what, got.Format(time.StampMicro), from.Format(time.StampMicro), to.Format(time.StampMicro))
	}
}

// TestProbesAndHooks: a startup probe that passes after 3 s, a liveness probe that kills the
// container once before it gets Ready, a postStart hook of 2 s followed by a second container,
// and a postStart hook that fails, on the real node, judged against the kubelet's own spans of
// its CRI calls (ExecSync runs a hook inside syncPod, StopContainer kills, StartContainer
// starts again): an event readyspan places a boundary at lies between the CRI call it follows
// and the next one (1 ms either side); a watch time lies after the change, within 1 s.
func TestProbesAndHooks(t *testing.T) {
	e := Setup(t)
	ns := e.Namespace(t, "e2e-probes")
	ctx := Ctx(t)
	const eventSlack, watchBound = time.Millisecond, time.Second

	startup := sleeper("startup", BusyboxImage)
	startup.Spec.Containers[0].Command = []string{"sh", "-c", "sleep 3; touch /dev/shm/started; exec sleep 3600"}
	startup.Spec.Containers[0].StartupProbe = execProbe("test -f /dev/shm/started || { echo not started; exit 1; }", 30)

	// Its first run never makes /dev/shm/healthy: three failed liveness probes kill it; the second
	// run (the emptyDir outlives the container) makes it and gets Ready.
	liveness := sleeper("liveness", BusyboxImage)
	liveness.Spec.Volumes = []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	liveness.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "state", MountPath: "/state"}}
	liveness.Spec.Containers[0].Command = []string{"sh", "-c", "if [ -f /state/ran ]; then touch /dev/shm/healthy; else touch /state/ran; fi; exec sleep 3600"}
	healthy := "test -f /dev/shm/healthy || { echo not healthy; exit 1; }"
	liveness.Spec.Containers[0].LivenessProbe = execProbe(healthy, 3)
	liveness.Spec.Containers[0].ReadinessProbe = execProbe(healthy, 1)

	poststart := sleeper("poststart", BusyboxImage)
	poststart.Spec.Containers[0].Name = "hooked"
	poststart.Spec.Containers[0].Lifecycle = hook("sleep 2")
	after := poststart.Spec.Containers[0]
	after.Name, after.Lifecycle = "after", nil
	poststart.Spec.Containers = append(poststart.Spec.Containers, after)

	failing := sleeper("poststart-fails", BusyboxImage)
	failing.Spec.Containers[0].Name = "hooked"
	failing.Spec.Containers[0].Lifecycle = hook("sleep 1; exit 3")

	pods := map[string]*corev1.Pod{}
	for _, p := range []*corev1.Pod{startup, liveness, poststart, failing} {
		pods[p.Name] = e.createPod(t, ns, p)
	}
	// Each Pod's trace: the three Ready ones once exported (30 s after Ready, without a
	// Service); the failing one after --fail-after.
	uids := []string{}
	for _, p := range pods {
		uids = append(uids, string(p.UID))
	}
	traces := e.WaitTraces(t, uids, 3*time.Minute, func(tr *Trace) bool { return tr.Root() != nil })
	criOf := func(t *testing.T, pod *corev1.Pod, want ...string) map[string][]*Span {
		t.Helper()
		var cri map[string][]*Span
		Eventually(t, time.Minute, "the kubelet's CRI spans of "+pod.Name, func() (bool, error) {
			var err error
			if cri, err = e.kubeletCRISpans(ctx, string(pod.UID)); err != nil {
				return false, err
			}
			for _, m := range want {
				if len(cri[m]) == 0 {
					return false, fmt.Errorf("no %s yet: %v", m, spanCounts(cri))
				}
			}
			return true, nil
		})
		return cri
	}

	t.Run("postStart then the next container", func(t *testing.T) {
		pod := pods["poststart"]
		tr := traces[string(pod.UID)]
		checkStartupTrace(t, tr, pod, "ready", false)
		cri := criOf(t, pod, criExecSync, criCreateContainer, criStartContainer)
		hookCall := cri[criExecSync][0]
		next := callAfter(cri, criCreateContainer, hookCall.EndTime())
		if next == nil {
			t.Fatalf("no CreateContainer after the hook (%v)", spanCounts(cri))
		}
		ps := containerSpan(t, tr, "hooked", "container.post_start")
		// Started is emitted after StartContainer returned, before the hook's exec.
		within(t, "post_start start (Started)", ps.StartTime(), cri[criStartContainer][0].EndTime().Add(-eventSlack), hookCall.StartTime().Add(eventSlack))
		within(t, "post_start end (the next container's first event)", ps.EndTime(), hookCall.EndTime().Add(-eventSlack), next.StartTime().Add(eventSlack))
		// Jaeger states start and duration in µs each: one may round the other way.
		if a := containerSpan(t, tr, "after", "container"); abs(a.StartTimeUS-(ps.StartTimeUS+ps.DurationUS)) > 1 {
			t.Errorf("container after starts at %s, not where the hook ended (%s)", a.StartTime().Format(time.StampMicro), ps.EndTime().Format(time.StampMicro))
		}
	})

	t.Run("postStart fails", func(t *testing.T) {
		pod := pods["poststart-fails"]
		tr := traces[string(pod.UID)]
		checkStartupTrace(t, tr, pod, "failed", false)
		cri := criOf(t, pod, criExecSync, criStopContainer)
		hookCall := cri[criExecSync][0]
		stop := callAfter(cri, criStopContainer, hookCall.EndTime())
		if stop == nil {
			t.Fatalf("no StopContainer after the hook (%v)", spanCounts(cri))
		}
		ps := containerSpan(t, tr, "hooked", "container.post_start")
		within(t, "post_start end (FailedPostStartHook)", ps.EndTime(), hookCall.EndTime().Add(-eventSlack), stop.StartTime().Add(eventSlack))
		if !ps.IsError() || ps.StatusMessage() != "FailedPostStartHook" {
			t.Errorf("post_start: error %v %q, want an error naming FailedPostStartHook", ps.IsError(), ps.StatusMessage())
		}
		rs := containerSpan(t, tr, "hooked", "container.restart")
		within(t, "restart start (Killing)", rs.StartTime(), hookCall.EndTime().Add(-eventSlack), stop.StartTime().Add(eventSlack))
		if r := rs.StrTag("readyspan.restart.reason"); r != "postStart hook failed" {
			t.Errorf("restart reason %q", r)
		}
		if m := tr.Root().StatusMessage(); !strings.Contains(m, "PostStartHookError") && !strings.Contains(m, "CrashLoopBackOff") {
			t.Errorf("pod.startup status %q names neither PostStartHookError nor CrashLoopBackOff", m)
		}
	})

	t.Run("liveness restart", func(t *testing.T) {
		pod := pods["liveness"]
		tr := traces[string(pod.UID)]
		checkStartupTrace(t, tr, pod, "ready", false)
		cri := criOf(t, pod, criStopContainer, criStartContainer)
		stop := cri[criStopContainer][0]
		again := callAfter(cri, criStartContainer, stop.EndTime())
		if again == nil {
			t.Fatalf("no StartContainer after the kill (%v)", spanCounts(cri))
		}
		rs := containerSpan(t, tr, "app", "container.restart")
		// Killing comes from killContainer just before StopContainer (the third failed probe's
		// exec ran outside syncPod, in the prober, so it is not among these spans).
		within(t, "restart start (Killing)", rs.StartTime(), stop.StartTime().Add(-time.Second), stop.StartTime().Add(eventSlack))
		within(t, "restart end (the second run seen running)", rs.EndTime(), again.EndTime(), again.EndTime().Add(watchBound))
		if r := rs.StrTag("readyspan.restart.reason"); r != "liveness probe failed" {
			t.Errorf("restart reason %q", r)
		}
		if kills := rs.Log("Killing"); len(kills) == 0 || !strings.Contains(fmt.Sprint(kills[0]["message"]), "failed liveness probe, will be restarted") {
			t.Errorf("the restart span's Killing events: %v", kills)
		}
		if rd := containerSpan(t, tr, "app", "container.readiness"); abs(rd.StartTimeUS-(rs.StartTimeUS+rs.DurationUS)) > 1 {
			t.Errorf("readiness starts at %s, not at the restart's end %s", rd.StartTime().Format(time.StampMicro), rs.EndTime().Format(time.StampMicro))
		}
	})

	t.Run("startup probe", func(t *testing.T) {
		pod := pods["startup"]
		tr := traces[string(pod.UID)]
		checkStartupTrace(t, tr, pod, "ready", false)
		cri := criOf(t, pod, criStartContainer)
		started := cri[criStartContainer][0].EndTime()
		sp := containerSpan(t, tr, "app", "container.startup_probe")
		within(t, "startup_probe start (Started)", sp.StartTime(), started.Add(-eventSlack), started.Add(kubeletSpanTolerance))
		// The container makes its file 3 s after it started; the next probe (every second)
		// passes, and the status that says so is a watch time after that.
		within(t, "startup_probe end", sp.EndTime(), started.Add(3*time.Second), started.Add(4*time.Second+watchBound))
		var failures int
		for _, ev := range e.PodEvents(t, ns, pod.Name) {
			if ev.Reason == "Unhealthy" && strings.HasPrefix(ev.Note, "Startup probe failed:") {
				failures++
				if at := EventTime(&ev); at.After(sp.EndTime()) {
					t.Errorf("a failed startup probe at %s, after the probe passed at %s", at.Format(time.StampMicro), sp.EndTime().Format(time.StampMicro))
				}
			}
		}
		if failures == 0 {
			t.Error("no Unhealthy event of the startup probe: the probe did not fail before the file was made")
		}
	})
}
