package phases

import "time"

// Volumes: where a Pod's volumes cost it time, from what the API shows.
//
// A PersistentVolumeClaim is bound before the Pod is bound to its node: the scheduler's
// VolumeBinding plugin rejects a Pod whose Immediate claim is unbound (FailedScheduling "pod has
// unbound immediate PersistentVolumeClaims"), and for a WaitForFirstConsumer claim it picks the
// node, writes the binding (a static PV's claimRef, or the claim's
// volume.kubernetes.io/selected-node annotation for a provisioner) and waits in PreBind, polling
// every second, until the PV controller has bound the claim (BindPodVolumes, v1.37). So a claim
// bound while the Pod waited is drawn in the scheduling phase (scheduling.volume_binding), with
// its name. Only a Pod that bypasses the scheduler (spec.nodeName set by its creator) can reach
// its node before its claim is bound: the kubelet then waits for it, and the claim's binding is
// evidence of a volume wait in the kubelet phase.
//
// The kubelet mounts a Pod's volumes before it creates its sandbox (Kubelet.SyncPod:
// WaitForAttachAndMount, then the runtime's SyncPod, RunPodSandbox and the
// PodReadyToStartContainers condition). No event or status states the mount's success for
// filesystem volumes, so kubelet.volumes is drawn only where the API shows a wait — an attach
// event, a failed mount or attach, a claim bound after the Pod reached its node — and its
// bounds are (volumeBounds):
//
//   - start: the Pod on its node, the sandbox step's start (the kubelet's work on the Pod);
//   - end: the sandbox ready (PodReadyToStartContainers, narrowed by the first container
//     event), an upper bound: the mount finished before the kubelet created the sandbox. The
//     latest evidence that the volumes were not yet mounted (the last failed mount or attach,
//     the attach, the claim's binding) is the lower bound, and the width between the two is
//     stated on the span (readyspan.volumes.window_ms): the mount finished in that window.
//
// When the kubelet's own spans are joined (syncPod's start → RunPodSandbox's start), they state
// the step's bounds precisely and take precedence here, in volumeBounds alone.

// volumeWindow is the kubelet's volume wait as drawn: its bounds, and the lower bound of its
// end (the last evidence the volumes were not mounted), unobserved when there is none.
type volumeWindow struct {
	start, end   point
	mountedAfter point
}

// volumeBounds is the one place the kubelet.volumes step's bounds are decided, from the Pod on
// its node (onNode), the sandbox ready (sandbox, unobserved when it never was) and the end of
// the kubelet phase as drawn (phaseEnd). ok is false when nothing shows a volume wait.
func volumeBounds(p *Pod, onNode, sandbox point, phaseEnd Instant) (w volumeWindow, ok bool) {
	for _, o := range p.VolumeEvents {
		w.mountedAfter = later(w.mountedAfter, lastOccurrence(o))
		ok = true
	}
	// A claim bound after the Pod reached its node (a Pod given its node directly): the kubelet
	// waited for it. One bound around the bind is the scheduler's (volumeBinding).
	for i := range p.Claims {
		if bound := resolve(p.Claims[i].Bound); onNode.observed && bound.observed && bound.t > onNode.t+Instant(consistencySlack) {
			w.mountedAfter, ok = later(w.mountedAfter, bound), true
		}
	}
	if !ok {
		return w, false
	}
	w.start, w.end = onNode, sandbox
	if !sandbox.observed {
		w.end = derived(phaseEnd)
	}
	return w, true
}

// lastOccurrence is when an occurrence last happened: its last time (whole seconds) when it
// repeated, else its first.
func lastOccurrence(o Occurrence) point {
	if !o.Last.IsZero() && InstantOf(o.Last) > o.Time.At {
		return point{t: InstantOf(o.Last), src: SourceEventSeconds, observed: true, uncertainty: time.Second}
	}
	if o.Time.At.IsZero() {
		return point{}
	}
	return point{t: o.Time.At, src: o.Time.Source, observed: true}
}

// volumes draws kubelet.volumes inside the sandbox step (sb), when the Pod shows a volume wait.
func (b *builder) volumes(sb int, onNode, sandbox point) {
	p := b.pod
	w, ok := volumeBounds(p, onNode, sandbox, b.drawn[sb].end)
	if !ok {
		return
	}
	i := b.add(spanHead{Name: SpanKubeletVolumes, Path: SpanKubeletVolumes, Service: ServiceKubelet}, sb, w.start, w.end)
	s := &b.trace.Spans[i]
	if w.end.observed && w.mountedAfter.observed && w.mountedAfter.t <= w.end.t {
		s.Attrs = append(s.Attrs, Attr{AttrVolumesWindow, millis(w.end.t.Sub(w.mountedAfter.t))})
	}
	var lastFailure *Occurrence
	for j := range p.VolumeEvents {
		o := &p.VolumeEvents[j]
		s.AddEvent(occurrenceEvent(o.Reason, *o))
		if IsVolumeFailure(o.Reason) {
			lastFailure = o
		}
	}
	sortEvents(s.Events())
	if !sandbox.observed && lastFailure != nil {
		s.Status, s.StatusMessage = StatusError, lastFailure.Reason+": "+lastFailure.Message
	}
}

// lastVolumeFailure is the Pod's last failed mount or attach, nil for none.
func lastVolumeFailure(p *Pod) *Occurrence {
	var out *Occurrence
	for i := range p.VolumeEvents {
		if IsVolumeFailure(p.VolumeEvents[i].Reason) {
			out = &p.VolumeEvents[i]
		}
	}
	return out
}

// volumeBinding draws a scheduling.volume_binding step for each claim the watch saw turn Bound
// after the Pod was created and before it was bound to its node (see above): from the
// scheduler's selected-node annotation when it showed one, else from the claim's creation
// when the claim was made after the Pod, else from the phase's start, not observed (the
// scheduler states nowhere when it began to bind a static volume); to the claim seen Bound.
func (b *builder) volumeBinding(parent int, created, scheduled point) {
	p := b.pod
	for i := range p.Claims {
		c := &p.Claims[i]
		bound := resolve(c.Bound)
		if !bound.observed || !created.observed || bound.t <= created.t {
			continue
		}
		if scheduled.observed && bound.t > scheduled.t+Instant(consistencySlack) {
			continue // bound after the Pod was on its node: the kubelet's wait (volumeBounds)
		}
		start := derived(created.t)
		if cr := resolve(c.Created); cr.observed && cr.t > created.t {
			start = cr
		}
		if sel := resolve(c.SelectedNode); sel.observed && sel.t <= bound.t && sel.t >= start.t {
			start = sel
		}
		j := b.add(spanHead{Name: SpanSchedulingVolumeBinding, Path: SpanSchedulingVolumeBinding + "/" + c.Name, Service: ServiceScheduler}, parent, start, bound)
		s := &b.trace.Spans[j]
		s.Attrs = append(s.Attrs, Attr{AttrClaimName, c.Name})
		if c.Volume != "" {
			s.Attrs = append(s.Attrs, Attr{AttrVolumeName, c.Volume})
		}
	}
}
