package terminal

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
)

// TestNodeWaterfall: a node's waterfall names the Node, its provisioner and NodeClaim, each
// step under the root with where its ends came from, each DaemonSet Pod by name; a hostile
// name reaches the terminal escaped.
func TestNodeWaterfall(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	at := func(s float64, src phases.Source) phases.Times {
		return phases.Times{{At: phases.InstantOf(t0.Add(time.Duration(s * float64(time.Second)))), Source: src}}
	}
	s := &node.Startup{Name: "kwok-\x1b[31mred", UID: "0000000d-0000-4000-8000-000000000001", Provisioner: phases.ServiceKarpenter, Outcome: node.OutcomeReady,
		Claim:   &phases.NodeClaimSeen{Name: "default-abc", NodePool: "default", UID: "0000000d-0000-4000-8000-000000000002", Created: at(0, phases.SourceWatch), Launched: at(1, phases.SourceStatus)},
		Created: at(30, phases.SourceWatch), Ready: at(41.5, phases.SourceWatch),
		DaemonPods: []node.DaemonPod{{PodRef: phases.PodRef{Namespace: "kube-system", Name: "agent-1", UID: "u1"}, DaemonSet: "agent", Ready: at(45, phases.SourceWatch)}}}
	var buf bytes.Buffer
	if err := NodeWaterfall(&buf, node.Build(s)); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"node/kwok-\\x1b[31mred  trace 0000000d000040008000000000000002  ready  45.000s",
		"provisioner karpenter, nodeclaim default-abc, nodepool default", "node.launch", "node.instance", "node.kubelet_ready",
		"node.daemonsets", "node.daemonset_pod kube-syste", "watch→status"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("an escape reached the terminal:\n%s", out)
	}
}
