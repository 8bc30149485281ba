package tracker

// Held counts what the tracker holds, for the tests of its caller that drive it through the
// correlator and for nothing else: reading it walks every Pod.
type Held struct {
	Workloads int // workloads followed (with placeholders for steps of one not seen yet)
	Rolling   int // rollouts in progress
	RolledOut int // of those, the controller's verdict in: waiting for their Pods
	Steps     int // scaling steps remembered, of every workload
	Pods      int // Pods followed
	Gone      int // of those, gone (kept for a rollout that may claim them)
	PodTraces int // of those, holding their own trace for a rollout not exported yet
}

// Held counts what the tracker holds now.
func (r *Tracker) Held() Held {
	h := Held{Workloads: len(r.workloads), Rolling: len(r.active), Pods: len(r.pods)}
	for w := range r.active {
		if w.cur.verdict.Known() {
			h.RolledOut++
		}
	}
	for _, w := range r.workloads {
		h.Steps += len(w.steps)
	}
	for _, p := range r.pods {
		if p.gone.Known() {
			h.Gone++
		}
		if p.trace != nil {
			h.PodTraces++
		}
	}
	return h
}
