package phases

import (
	"encoding/hex"
	"slices"
	"strings"
	"time"
)

// ServiceContainerd is the service of containerd's spans copied into a trace.
const ServiceContainerd = "containerd"

// AttrLinkKind is on the link from a copy to its original, LinkComponentSpan its value.
const (
	AttrLinkKind      = AttrLinkRelation
	LinkComponentSpan = "component-span"
)

// ComponentSpan is one span a component exported itself (the kube-apiserver, a kubelet,
// containerd), as readyspan received it over OTLP. Attrs holds its string, integer and
// boolean attributes, bounded and as the receiver kept them.
type ComponentSpan struct {
	Service       string // ServiceAPIServer, ServiceKubelet or ServiceContainerd
	TraceID       TraceID
	SpanID        SpanID
	Parent        SpanID
	Name          string
	Start, End    time.Time
	Error         bool
	StatusMessage string
	Attrs         []Attr
}

// Attr is the value of a string attribute of the span, "" when it has none.
func (c *ComponentSpan) Attr(key string) string {
	for _, a := range c.Attrs {
		if a.Key == key {
			s, _ := a.Value.(string)
			return s
		}
	}
	return ""
}

// ComponentTrace is the spans of one of a component's traces that concern one Pod: one
// apiserver request, or one kubelet syncPod with its CRI calls and containerd's spans beneath
// them (containerd continues the kubelet's trace: the kubelet propagates its trace context).
type ComponentTrace []ComponentSpan

// The component spans' names and attributes Join reads, as the components state them
// (kube-apiserver and kubelet 1.37, containerd 2.4).
const (
	compAttrResource    = "resource"    // the apiserver handler's resource
	compAttrSubresource = "subresource" // "", "binding", "status"
	compAttrVerb        = "verb"        // POST, PUT, PATCH
	compSyncPod         = "syncPod"
	compCreateEtcd      = "Create etcd3"
	compUpdateEtcd      = "GuaranteedUpdate etcd3"
	criService          = "runtime.v1.RuntimeService/"
	criImageService     = "runtime.v1.ImageService/"
)

// compNames maps the name a component gives a span to the catalogue's name of its copy. A span
// whose name is not here is not copied (its original stays one link away).
var compNames = map[string]map[string]string{
	ServiceAPIServer: {
		"authentication":          SpanAPIAuthn,
		"priorityandfairness":     SpanAPIFairness,
		"authorization":           SpanAPIAuthz,
		"Create":                  SpanAPIHandler,
		"Update":                  SpanAPIHandler,
		"Patch":                   SpanAPIHandler,
		"Call mutating webhook":   SpanAPIMutatingHook,
		"Call validating webhook": SpanAPIValidatingHook,
		compCreateEtcd:            SpanAPIStorage,
		compUpdateEtcd:            SpanAPIStorage,
	},
	ServiceKubelet: {
		compSyncPod:                    SpanKubeletSyncPod,
		criService + "RunPodSandbox":   SpanCRIRunPodSandbox,
		criImageService + "PullImage":  SpanCRIPullImage,
		criService + "CreateContainer": SpanCRICreateContainer,
		criService + "StartContainer":  SpanCRIStartContainer,
	},
	ServiceContainerd: {
		"cri.sandbox.run":            SpanContainerdSandbox,
		"cni.setup_pod_network":      SpanContainerdNetworkSetup,
		"pkg.unpack.unpacker.unpack": SpanContainerdImageUnpack,
	},
}

// Join copies the components' spans of the Pod into its trace and returns how many it copied.
// Each copy has the component's own start and end (time source component-span) and links to
// its original. An apiserver request lies under the phase of its role in the startup: the
// user's create of a bare Pod under apiserver, a controller's create under
// controllers.replicaset (or controllers), the Binding under scheduling, the kubelet's status
// writes under status; its steps (filters, handler, webhooks, the etcd write) under it. A
// kubelet syncPod that made CRI calls to start the Pod lies under kubelet with those calls and
// containerd's spans beneath them; kubelet.volumes is derived from it where the order of its
// spans makes it certain (syncPod start → RunPodSandbox start). Traces of other roles
// (other writes, syncPods that started nothing) are not copied.
func (t *Trace) Join(traces []ComponentTrace) int {
	if len(t.Spans) == 0 || t.Pod == nil {
		return 0
	}
	j := joiner{t: t, seed: spanIDSeedFor(t.Pod.UID)}
	// A write on the Pod's name before the request that created it was on an earlier Pod of
	// the same name.
	for _, ct := range traces {
		if r, ok := role(ct); ok && r.create && (j.created.IsZero() || r.root.Start.Before(j.created)) {
			j.created = r.root.Start
		}
	}
	for _, ct := range traces {
		if len(ct) == 0 {
			continue
		}
		switch ct[0].Service {
		case ServiceAPIServer:
			j.request(ct)
		case ServiceKubelet, ServiceContainerd:
			j.sync(ct)
		}
	}
	if len(j.added) == 0 {
		return 0
	}
	if j.volumes {
		// The volume events and a failure drawn from the API stay on the step: the kubelet's
		// spans state when it ran, not why it took that long.
		for i := range t.Spans {
			if d := &t.Spans[i]; d.Name == SpanKubeletVolumes && d.StartBound.Source != SourceComponentSpan {
				moveVolumeNotes(d, j.added)
			}
		}
		t.Spans = dropDrawn(t.Spans, SpanKubeletVolumes)
	}
	t.Spans = mergeByStart(t.Spans, j.added)
	return len(j.added)
}

// moveVolumeNotes gives the events and the Error status of kubelet.volumes drawn from the API to
// the first one derived from the kubelet's spans.
func moveVolumeNotes(drawn *Span, added []Span) {
	for i := range added {
		if a := &added[i]; a.Name == SpanKubeletVolumes {
			a.AddEvent(drawn.Events()...)
			if drawn.Status == StatusError && a.Status != StatusError {
				a.Status, a.StatusMessage = drawn.Status, drawn.StatusMessage
			}
			return
		}
	}
}

// dropDrawn removes the spans named name that were drawn from the API (not copied from a
// component), their children moved up to their parent: the component's order states the step
// exactly, where the API only bounds it.
func dropDrawn(spans []Span, name string) []Span {
	parent := map[SpanID]SpanID{}
	out := spans[:0:0]
	for _, s := range spans {
		if s.Name == name && s.StartBound.Source != SourceComponentSpan {
			parent[s.SpanID] = s.ParentSpanID
			continue
		}
		out = append(out, s)
	}
	if len(parent) == 0 {
		return spans
	}
	for i := range out {
		for p, ok := parent[out[i].ParentSpanID]; ok; p, ok = parent[p] {
			out[i].ParentSpanID = p
		}
	}
	return out
}

type joiner struct {
	t       *Trace
	seed    spanIDSeed
	added   []Span
	created time.Time // the start of the request that created the Pod, if joined
	volumes bool      // kubelet.volumes derived from the kubelet's spans
}

// requestRole is what an apiserver request was: its root span, and its handler's subresource
// and verb.
type requestRole struct {
	root   *ComponentSpan
	sub    string
	verb   string
	create bool // the request that created the Pod
}

// role reads an apiserver request's role from its handler span (resource pods), if it has one.
func role(ct ComponentTrace) (requestRole, bool) {
	if len(ct) == 0 || ct[0].Service != ServiceAPIServer {
		return requestRole{}, false
	}
	var handler, root *ComponentSpan
	ids := make(map[SpanID]bool, len(ct))
	for i := range ct {
		ids[ct[i].SpanID] = true
	}
	for i := range ct {
		s := &ct[i]
		if compNames[ServiceAPIServer][s.Name] == SpanAPIHandler && s.Attr(compAttrResource) == "pods" {
			handler = s
		}
		if s.Parent.IsZero() || !ids[s.Parent] {
			if root == nil || s.Start.Before(root.Start) {
				root = s
			}
		}
	}
	if handler == nil || root == nil {
		return requestRole{}, false
	}
	r := requestRole{root: root, sub: handler.Attr(compAttrSubresource), verb: handler.Attr(compAttrVerb)}
	r.create = r.sub == "" && r.verb == "POST"
	return r, true
}

// request copies one apiserver request, if its role in the startup is known.
func (j *joiner) request(ct ComponentTrace) {
	r, ok := role(ct)
	if !ok || !r.create && r.root.Start.Before(j.created) {
		return
	}
	var name string
	var anchor *Span
	switch {
	case r.sub == "binding":
		name, anchor = SpanAPIBinding, j.t.Phase(PhaseScheduling)
	case r.sub == "status":
		name, anchor = SpanAPIStatusWrite, j.t.Phase(PhaseStatus)
	case r.create && j.t.Pod.Root == RootBarePod:
		name, anchor = SpanAPIRequest, j.t.Phase(PhaseAPIServer)
	case r.create:
		// The Pod's controller made the request in its step.
		if cs := j.t.Pod.Controllers; len(cs) > 0 {
			anchor = j.t.span(ControllerStep(cs[len(cs)-1].Kind))
		}
		name = SpanAPIPodCreate
		if anchor == nil {
			anchor = j.t.Phase(PhaseControllers)
		}
	default:
		return
	}
	if anchor == nil {
		return
	}
	j.copyTree(ct, map[SpanID]string{r.root.SpanID: name}, anchor.SpanID)
}

// sync copies one kubelet trace: its syncPods that made the CRI calls starting the Pod.
func (j *joiner) sync(ct ComponentTrace) {
	kubelet := j.t.Phase(PhaseKubelet)
	if kubelet == nil {
		return
	}
	// A syncPod is copied when one of the CRI calls that start a Pod is its child.
	syncs := map[SpanID]*ComponentSpan{}
	for i := range ct {
		if ct[i].Service == ServiceKubelet && ct[i].Name == compSyncPod {
			syncs[ct[i].SpanID] = &ct[i]
		}
	}
	started := map[SpanID]bool{}
	var sandbox []*ComponentSpan
	for i := range ct {
		s := &ct[i]
		if s.Service != ServiceKubelet || syncs[s.Parent] == nil {
			continue
		}
		if n := compNames[ServiceKubelet][s.Name]; n != "" && n != SpanKubeletSyncPod {
			started[s.Parent] = true
			if n == SpanCRIRunPodSandbox {
				sandbox = append(sandbox, s)
			}
		}
	}
	if len(started) == 0 {
		return
	}
	named := map[SpanID]string{}
	for id := range started {
		named[id] = SpanKubeletSyncPod
	}
	j.copyTree(ct, named, kubelet.SpanID)
	for _, rps := range sandbox {
		sp := syncs[rps.Parent]
		if !rps.Start.After(sp.Start) {
			continue
		}
		path := SpanKubeletVolumes + "@" + hex.EncodeToString(sp.SpanID[:])
		b := Bound{Source: SourceComponentSpan, Observed: true}
		j.volumes = true
		j.added = append(j.added, Span{
			Name: SpanKubeletVolumes, Path: path, Service: ServiceKubelet,
			SpanID: j.seed.spanID(path), ParentSpanID: kubelet.SpanID,
			Start: sp.Start, End: rps.Start, StartBound: b, EndBound: b,
		})
	}
}

// StartedPod reports whether a kubelet trace holds the syncPod that started a Pod: one with a
// RunPodSandbox call beneath it (the trace a Pod's trace waits for).
func StartedPod(ct ComponentTrace) bool {
	syncs := map[SpanID]bool{}
	for i := range ct {
		if ct[i].Service == ServiceKubelet && ct[i].Name == compSyncPod {
			syncs[ct[i].SpanID] = true
		}
	}
	for i := range ct {
		if ct[i].Service == ServiceKubelet && syncs[ct[i].Parent] && compNames[ServiceKubelet][ct[i].Name] == SpanCRIRunPodSandbox {
			return true
		}
	}
	return false
}

// SandboxRuntimeIn reports whether a kubelet trace holds containerd's side of a RunPodSandbox
// call: a containerd span whose parent is the kubelet's RunPodSandbox span. containerd ends that
// span after every span of the sandbox's making beneath it (the CNI's network setup among them)
// and exports spans as they end, so once it has come the rest has. Its spans beneath the later
// CreateContainer and StartContainer calls, or a first batch holding only the sandbox's
// children, do not say so.
func SandboxRuntimeIn(ct ComponentTrace) bool {
	sandbox := map[SpanID]bool{}
	for i := range ct {
		if ct[i].Service == ServiceKubelet && compNames[ServiceKubelet][ct[i].Name] == SpanCRIRunPodSandbox {
			sandbox[ct[i].SpanID] = true
		}
	}
	for i := range ct {
		if ct[i].Service == ServiceContainerd && sandbox[ct[i].Parent] {
			return true
		}
	}
	return false
}

// copyTree copies the spans of ct that are named (the roots given in named, under anchor) or
// catalogued (compNames) and lie beneath a named one, each under its nearest copied ancestor.
func (j *joiner) copyTree(ct ComponentTrace, named map[SpanID]string, anchor SpanID) {
	byID := make(map[SpanID]*ComponentSpan, len(ct))
	for i := range ct {
		byID[ct[i].SpanID] = &ct[i]
	}
	var visit func(s *ComponentSpan) (SpanID, bool)
	// visit returns the copy a span's descendants lie under, and whether the span lies beneath
	// a named root at all. Ancestors are visited first; a trace's spans are few.
	done := map[SpanID]bool{}
	under := map[SpanID]SpanID{}
	beneath := map[SpanID]bool{}
	visit = func(s *ComponentSpan) (SpanID, bool) {
		if done[s.SpanID] {
			return under[s.SpanID], beneath[s.SpanID]
		}
		done[s.SpanID] = true // a cycle in hostile input ends here
		parentCopy, inside := anchor, false
		if _, isRoot := named[s.SpanID]; !isRoot {
			p := byID[s.Parent]
			if p == nil {
				return SpanID{}, false
			}
			parentCopy, inside = visit(p)
			if !inside {
				return SpanID{}, false
			}
		}
		name := named[s.SpanID]
		if name == "" {
			name = compNames[s.Service][s.Name]
		}
		if name == "" {
			under[s.SpanID], beneath[s.SpanID] = parentCopy, true
			return parentCopy, true
		}
		c := j.copySpan(s, name, parentCopy)
		under[s.SpanID], beneath[s.SpanID] = c, true
		return c, true
	}
	for i := range ct {
		visit(&ct[i])
	}
}

// copySpan appends the copy of s named name under parent and returns its ID.
func (j *joiner) copySpan(s *ComponentSpan, name string, parent SpanID) SpanID {
	path := name + "@" + hex.EncodeToString(s.SpanID[:])
	b := Bound{Source: SourceComponentSpan, Observed: true}
	c := Span{
		Name: name, Path: path, Service: s.Service,
		SpanID: j.seed.spanID(path), ParentSpanID: parent,
		Start: s.Start, End: s.End, StartBound: b, EndBound: b,
		Attrs: append(componentAttrs(s.Attrs), Attr{AttrComponentSpanName, s.Name}),
	}
	if s.Error {
		c.Status, c.StatusMessage = StatusError, s.StatusMessage
	}
	c.AddLink(Link{TraceID: s.TraceID, SpanID: s.SpanID, Attrs: []Attr{{AttrLinkKind, LinkComponentSpan}}})
	j.added = append(j.added, c)
	return c.SpanID
}

// readyspanPrefix begins every attribute key readyspan writes itself.
const readyspanPrefix = "readyspan."

// componentAttrs is what a copy keeps of a component's attributes: all but those in readyspan's
// namespace, which is readyspan's own. A sender's readyspan.time.source.start or
// readyspan.component.span_name would otherwise stand beside (and, in a view that reads the
// last value of a key, in place of) what readyspan states about the copy. The copy's own
// attributes are written after these, for readers that take the last value of a key.
func componentAttrs(as []Attr) []Attr {
	out := make([]Attr, 0, len(as)+1)
	for _, a := range as {
		if strings.HasPrefix(a.Key, readyspanPrefix) {
			continue
		}
		out = append(out, a)
	}
	return out
}

// span is the first span of the trace with the name, or nil.
func (t *Trace) span(name string) *Span {
	for i := range t.Spans {
		if t.Spans[i].Name == name {
			return &t.Spans[i]
		}
	}
	return nil
}

// mergeByStart returns the trace's spans with added among them in start order: the root first,
// the spans already there in their order, each added span after those that start no later.
func mergeByStart(spans, added []Span) []Span {
	slices.SortStableFunc(added, func(a, b Span) int { return a.Start.Compare(b.Start) })
	out := make([]Span, 0, len(spans)+len(added))
	out = append(out, spans[0])
	i, k := 1, 0
	for i < len(spans) || k < len(added) {
		if k == len(added) || i < len(spans) && !spans[i].Start.After(added[k].Start) {
			out = append(out, spans[i])
			i++
			continue
		}
		out = append(out, added[k])
		k++
	}
	return out
}

// MarkMissing states on the root which components' spans the trace waited for and was exported
// without.
func (t *Trace) MarkMissing(components []string) {
	if len(components) == 0 || len(t.Spans) == 0 {
		return
	}
	root := &t.Spans[0]
	root.Attrs = append(slices.Clip(root.Attrs), Attr{AttrComponentsMissing, strings.Join(components, ",")})
}
