package phases

// The controllers phase: the workload controllers' steps from the user's request to the Pod's
// creation, and the cause of a replacement.

func (b *builder) controllers(parent int, persisted, created, scaled point) {
	p := b.pod
	switch p.Root {
	case RootDeployment:
		if !scaled.observed {
			scaled = derived(persisted.t)
		}
		b.add(spanHead{Name: SpanControllersDeployment, Path: SpanControllersDeployment, Service: ServiceController}, parent, persisted, scaled)
		b.add(spanHead{Name: SpanControllersReplicaSet, Path: SpanControllersReplicaSet, Service: ServiceController}, parent, scaled, created)
	case RootReplicaSet:
		i := b.add(spanHead{Name: SpanControllersReplicaSet, Path: SpanControllersReplicaSet, Service: ServiceController}, parent, persisted, created)
		b.causeAttrs(i)
	case RootCronJob:
		// The CronJob controller's delay: the schedule time → its Job created; then the job
		// controller's step, from the Job to the Pod.
		job := resolve(p.JobCreated)
		if !job.observed || job.t < persisted.t {
			job = point{t: persisted.t, src: job.src, observed: job.observed}
		}
		b.add(spanHead{Name: SpanControllersCronJob, Path: SpanControllersCronJob, Service: ServiceController}, parent, persisted, job)
		b.workloadStep(parent, SpanControllersJob, job, created)
	case RootStatefulSet:
		b.workloadStep(parent, SpanControllersStatefulSet, persisted, created)
	case RootDaemonSet:
		b.workloadStep(parent, SpanControllersDaemonSet, persisted, created)
	case RootJob:
		b.workloadStep(parent, SpanControllersJob, persisted, created)
	}
}

// workloadStep draws a workload controller's step: from what gave it reason to create the Pod
// (its trigger; the root request's persistence when the trigger is that request or unstated)
// to the Pod created. A trigger after the Pod's creation (clocks of two components) is clamped
// to it by add, which says so.
func (b *builder) workloadStep(parent int, name string, from, created point) {
	if t := resolve(b.pod.Trigger); t.observed && t.t > from.t {
		from = t
	} else if !t.observed && b.pod.Cause != CauseNone && b.pod.Cause != CauseChange && b.pod.Cause != CauseSchedule {
		// The cause is known (a replacement, a predecessor) but not when it came.
		from.observed, from.src = false, SourceDerived
	}
	i := b.add(spanHead{Name: name, Path: name, Service: ServiceController}, parent, from, created)
	b.causeAttrs(i)
}

// causeAttrs names the cause of a controller's step on its span.
func (b *builder) causeAttrs(i int) {
	p := b.pod
	if p.Cause == CauseNone {
		return
	}
	sp := &b.trace.Spans[i]
	sp.Attrs = append(sp.Attrs, Attr{AttrCause, string(p.Cause)})
	if p.CauseObject != "" {
		sp.Attrs = append(sp.Attrs, Attr{AttrCausePod, p.CauseObject})
	}
}
