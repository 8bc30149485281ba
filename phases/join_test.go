package phases

import (
	"strings"
	"testing"
	"time"
)

// joinTrace is a trace with its root and six phases, and a kubelet.volumes drawn from the API
// with a child, for a bare Pod.
func joinTrace(t0 time.Time) *Trace {
	tr := &Trace{Pod: &Pod{UID: "u", Name: "p", Namespace: "ns", Root: RootBarePod}}
	root := Span{Name: RootSpanName, Path: RootSpanName, SpanID: SpanIDFor("u", RootSpanName), Start: t0, End: t0.Add(10 * time.Second)}
	tr.Spans = append(tr.Spans, root)
	for i, p := range Phases {
		tr.Spans = append(tr.Spans, Span{Name: p, Path: p, SpanID: SpanIDFor("u", p), ParentSpanID: root.SpanID,
			Start: t0.Add(time.Duration(i) * time.Second), End: t0.Add(time.Duration(i+1) * time.Second)})
	}
	kubelet := tr.Phase(PhaseKubelet)
	vol := Span{Name: SpanKubeletVolumes, Path: "v", SpanID: SpanIDFor("u", "v"), ParentSpanID: kubelet.SpanID,
		Start: kubelet.Start, End: kubelet.End, StartBound: Bound{Source: SourceWatch, Observed: true}, EndBound: Bound{Source: SourceWatch, Observed: true},
		Status: StatusError, StatusMessage: `MountVolume.SetUp failed for volume "cfg"`}
	vol.AddEvent(Event{Name: "FailedMount", Time: kubelet.Start})
	tr.Spans = append(tr.Spans, vol, Span{Name: "child", Path: "c", SpanID: SpanIDFor("u", "c"), ParentSpanID: vol.SpanID, Start: vol.Start, End: vol.End})
	return tr
}

func cs(service string, trace byte, id, parent byte, name string, start, end time.Time, kv ...string) ComponentSpan {
	c := ComponentSpan{Service: service, Name: name, Start: start, End: end}
	c.TraceID[0], c.SpanID[0] = trace, id
	if parent != 0 {
		c.Parent[0] = parent
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c.Attrs = append(c.Attrs, Attr{kv[i], kv[i+1]})
	}
	return c
}

// The kubelet's order states kubelet.volumes exactly: it replaces the one drawn from the API
// (whose children move up); a write on the Pod's name before the request that created it was an
// earlier Pod's and is not joined; a parent cycle in received spans ends.
func TestJoinPrecedenceAndOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	tr := joinTrace(t0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	create := ComponentTrace{
		cs(ServiceAPIServer, 1, 1, 0, "POST /api/v1/namespaces/{:namespace}/pods", at(1000), at(1020)),
		cs(ServiceAPIServer, 1, 2, 1, "Create", at(1001), at(1019), "resource", "pods", "verb", "POST", "subresource", ""),
		cs(ServiceAPIServer, 1, 3, 2, "Create etcd3", at(1005), at(1010), "key", "/pods/ns/p"),
	}
	earlier := ComponentTrace{
		cs(ServiceAPIServer, 2, 1, 0, "PATCH /api/v1/namespaces/{:namespace}/pods/{:name}/status", at(500), at(510)),
		cs(ServiceAPIServer, 2, 2, 1, "Patch", at(501), at(509), "resource", "pods", "verb", "PATCH", "subresource", "status"),
	}
	sync := ComponentTrace{
		cs(ServiceKubelet, 3, 1, 0, "syncPod", at(4100), at(5000), AttrPodUID, "u"),
		cs(ServiceKubelet, 3, 2, 1, "runtime.v1.RuntimeService/RunPodSandbox", at(4300), at(4500)),
		cs(ServiceContainerd, 3, 3, 2, "runtime.v1.RuntimeService/RunPodSandbox", at(4301), at(4499)),
		cs(ServiceContainerd, 3, 4, 3, "cni.setup_pod_network", at(4310), at(4400)),
		cs(ServiceContainerd, 3, 5, 6, "cni.Setup", at(4311), at(4390)), // parents 5 → 6 → 5: a cycle
		cs(ServiceContainerd, 3, 6, 5, "pkg.unpack.unpacker.unpack", at(4312), at(4380)),
	}
	n := tr.Join([]ComponentTrace{earlier, sync, create})
	names := map[string]int{}
	var vol *Span
	for i := range tr.Spans {
		s := &tr.Spans[i]
		names[s.Name]++
		if s.Name == SpanKubeletVolumes {
			vol = s
		}
	}
	if names[SpanAPIStatusWrite] != 0 || names[SpanAPIRequest] != 1 || names[SpanAPIStorage] != 1 {
		t.Errorf("joined %v: want the create request and its etcd write, not the earlier Pod's status write", names)
	}
	if names[SpanKubeletVolumes] != 1 || vol == nil || vol.StartBound.Source != SourceComponentSpan || !vol.Start.Equal(at(4100)) || !vol.End.Equal(at(4300)) {
		t.Fatalf("kubelet.volumes: %d, %+v; want one, syncPod start → RunPodSandbox start", names[SpanKubeletVolumes], vol)
	}
	if es := vol.Events(); len(es) != 1 || es[0].Name != "FailedMount" || vol.Status != StatusError {
		t.Errorf("kubelet.volumes kept events %v, status %v: want the drawn one's FailedMount and Error", es, vol.Status)
	}
	if c := tr.Find("c"); c == nil || c.ParentSpanID != tr.Phase(PhaseKubelet).SpanID {
		t.Errorf("the drawn kubelet.volumes' child was not moved up to kubelet: %+v", c)
	}
	if names[SpanContainerdNetworkSetup] != 1 || names[SpanContainerdImageUnpack] != 0 {
		t.Errorf("containerd: %v; want the network setup, and nothing of a parent cycle", names)
	}
	if n != 7 {
		t.Errorf("Join returned %d, want 7 (request, handler, etcd write, syncPod, RunPodSandbox, network setup, volumes)", n)
	}
	for i := 1; i < len(tr.Spans); i++ {
		if tr.Spans[i].Start.Before(tr.Spans[i-1].Start) && tr.Spans[i-1].Name != RootSpanName && tr.Spans[i].StartBound.Source == SourceComponentSpan {
			t.Errorf("%s starts before %s: a joined span out of start order", tr.Spans[i].Name, tr.Spans[i-1].Name)
		}
	}
}

// readyspan's namespace is its own: a sender's attributes under readyspan. do not reach the copy,
// which states readyspan's own source of its times and the component's name for it; the
// component's other attributes do.
func TestJoinDropsForgedReadyspanAttributes(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	tr := joinTrace(t0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	forged := []string{AttrSourceStart, "audit", AttrPrecisionStart, "1s", AttrComponentSpanName, "forged",
		AttrObserved, "false", "readyspan.anything", "x"}
	sync := ComponentTrace{
		cs(ServiceKubelet, 3, 1, 0, "syncPod", at(4100), at(5000), append([]string{AttrPodUID, "u"}, forged...)...),
		cs(ServiceKubelet, 3, 2, 1, "runtime.v1.RuntimeService/RunPodSandbox", at(4300), at(4500), forged...),
	}
	if tr.Join([]ComponentTrace{sync}) == 0 {
		t.Fatal("nothing joined")
	}
	n := 0
	for i := range tr.Spans {
		s := &tr.Spans[i]
		if s.StartBound.Source != SourceComponentSpan || s.Name == SpanKubeletVolumes {
			continue
		}
		n++
		for _, a := range s.Attrs {
			if strings.HasPrefix(a.Key, "readyspan.") && a.Key != AttrComponentSpanName || a.Value == "forged" {
				t.Errorf("%s kept the sender's %s=%v", s.Name, a.Key, a.Value)
			}
		}
		if v := s.Attr(AttrSourceStart); v != "component-span" {
			t.Errorf("%s: source of its start %v, want component-span", s.Name, v)
		}
		if v := s.Attr(AttrComponentSpanName); v != "syncPod" && v != "runtime.v1.RuntimeService/RunPodSandbox" {
			t.Errorf("%s: component span name %v", s.Name, v)
		}
		if s.Name == SpanKubeletSyncPod && s.Attr(AttrPodUID) != "u" {
			t.Errorf("%s lost the component's %s", s.Name, AttrPodUID)
		}
	}
	if n != 2 {
		t.Errorf("%d copies, want the syncPod and its RunPodSandbox", n)
	}
}

// Where a span's attributes name a key its bounds state, the bounds are the span's: Attr and
// AllAttrs give readyspan's statement of its times, once; of a key given twice in Attrs, the
// last (a copy's own attributes are written after the component's).
func TestBoundsOverAttributes(t *testing.T) {
	b := Bound{Source: SourceComponentSpan, Observed: true}
	s := Span{StartBound: b, EndBound: b, Attrs: []Attr{
		{AttrSourceStart, "audit"}, {AttrComponentSpanName, "forged"}, {"k", "v"}, {AttrComponentSpanName, "syncPod"}, {AttrSourceEnd, "watch"},
	}}
	if v := s.Attr(AttrSourceStart); v != "component-span" {
		t.Errorf("Attr(%s) = %v, want component-span", AttrSourceStart, v)
	}
	if v := s.Attr(AttrComponentSpanName); v != "syncPod" {
		t.Errorf("Attr(%s) = %v, want the last, syncPod", AttrComponentSpanName, v)
	}
	m := map[string][]any{}
	for _, a := range s.AllAttrs() {
		m[a.Key] = append(m[a.Key], a.Value)
	}
	if v := m[AttrSourceStart]; len(v) != 1 || v[0] != "component-span" {
		t.Errorf("AllAttrs: %s = %v, want component-span once", AttrSourceStart, v)
	}
	if v := m[AttrSourceEnd]; len(v) != 1 || v[0] != "component-span" {
		t.Errorf("AllAttrs: %s = %v, want component-span once", AttrSourceEnd, v)
	}
	if v := m["k"]; len(v) != 1 {
		t.Errorf("AllAttrs lost k: %v", m)
	}
}
