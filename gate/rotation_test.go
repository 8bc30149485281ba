package gate_test

import (
	"slices"
	"testing"
	"time"

	"github.com/readyspan/readyspan/gate"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// TestRotation: the rolling-update capture's rollouts removed old Pods, but no node component
// reported (the capture has none): the rotation objective is not observed, a failure unless
// the file says when_not_observed: pass. With one old Pod's removal reported 1.5 s after its
// deletion (no preStop hook: its stop), the objective measures 1.5 s and names that Pod.
func TestRotation(t *testing.T) {
	in := replayed(t, "rolling-update-waves")
	strict := slo(t, "version: 1\nrotation:\n  max_pods: 0\n  max_after_stop: 1s\n")
	v := gate.Judge(strict, in)
	if r := result(t, v, "rotation max_pods"); r.Status != gate.StatusNotObserved || v.Exit != gate.ExitBroken {
		t.Fatalf("no node component: %s, exit %d; want not observed, exit 1", r.Status, v.Exit)
	}
	lenient := slo(t, "version: 1\nrotation:\n  max_pods: 0\n  when_not_observed: pass\n")
	if v := gate.Judge(lenient, in); v.Exit != gate.ExitPass {
		t.Fatalf("when_not_observed: pass: exit %d\n%+v", v.Exit, v.Results)
	}

	// Report one old Pod's removal from two nodes' rules, the last 1.5 s after its deletion.
	var rt *rollout.Trace
	var victim string
	for i, tr := range in.Rollouts {
		for _, o := range tr.Rollout.OldPods {
			deleted, ok := o.Deleted.Resolve()
			if !ok || o.PreStop || rt != nil {
				continue
			}
			r := *tr.Rollout
			r.OldPods = slices.Clone(r.OldPods)
			for j := range r.OldPods {
				if r.OldPods[j].UID == o.UID {
					r.OldPods[j].Rotation = &phases.Programming{Wait: 10 * time.Second, Nodes: []phases.NodeProgramming{
						{Node: "node-a", At: deleted.Time().Add(300 * time.Millisecond)},
						{Node: "node-b", At: deleted.Time().Add(1500 * time.Millisecond)}}}
				}
			}
			rt, victim = rollout.Build(&r), o.Name
			in.Rollouts[i] = rt
		}
	}
	if rt == nil {
		t.Fatal("no old Pod without a preStop hook in the capture")
	}
	v = gate.Judge(strict, in)
	pods, after := result(t, v, "rotation max_pods"), result(t, v, "rotation max_after_stop")
	if pods.Status != gate.StatusBroken || pods.Measured != 1 || len(pods.Culprits) != 1 || pods.Culprits[0].Name != victim {
		t.Errorf("max_pods: %s, %v Pods, culprits %+v; want broken by %s", pods.Status, pods.Measured, pods.Culprits, victim)
	}
	if after.Status != gate.StatusBroken || after.Measured != 1.5 || after.Culprits[0].TraceID != rt.TraceID.String() {
		t.Errorf("max_after_stop: %s, %vs, culprits %+v; want broken at 1.5s in trace %s", after.Status, after.Measured, after.Culprits, rt.TraceID)
	}
	if v := gate.Judge(slo(t, "version: 1\nrotation:\n  max_pods: 1\n  max_after_stop: 2s\n"), in); v.Exit != gate.ExitPass {
		t.Errorf("one old Pod 1.5 s late allowed: exit %d\n%+v", v.Exit, v.Results)
	}
}
