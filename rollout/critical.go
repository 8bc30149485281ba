package rollout

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/readyspan/readyspan/phases"
)

// Category is one kind of time on a rollout's critical path and in a Pod's row of its Gantt.
// Name is the attribute and JSON key, Words what the summary sentence says, Letter the terminal
// Gantt's (0 for a kind no row draws), Page the page's class (its colour).
//
// The categories (Categories, generated from phases/conventions.yaml) split the kubelet phase in
// three, because "the kubelet" does not answer why: image pulls (union of the Pod's
// container.image_pull spans), readiness (union of its container.readiness spans: container
// started → ready), and the rest of the kubelet phase (sandbox, volumes, create, start). Pulls and
// readiness of a Pod whose containers were failing (a pull error, a crash loop) count, from the
// first failure on, as failing: a crash loop is not a wait for a readiness probe.
type Category struct {
	Name   string
	Words  string
	Letter rune
	Page   string
}

// item is one Pod interval of the rollout: a new Pod created → available, or an old Pod
// deletion requested → gone.
type item struct {
	uid        string
	start, end time.Time
	endKnown   bool
	// endSeen is readyspan's own receive time of the end (zero when the watch did not see it),
	// compared with a step's receive time when the end's best stamp comes after the step's.
	endSeen time.Time
	step    int // index into Rollout.Steps, -1 when no step is known to have caused it
	newPod  *NewPod
	oldPod  *OldPod
	readyAt time.Time // new Pods: Ready (min_ready runs from here to available)
}

type timeline struct {
	list      []*item
	stepTimes []time.Time
	// stepSeen is readyspan's receive time of each step's Event (zero when unknown).
	stepSeen []time.Time
	// unseenDown marks the scale-down steps none of whose removed Pods was observed: after
	// the fact (explain), the API no longer holds the old Pods, so what they did is unknown.
	unseenDown []bool
	// newPodsEnableDown: only a new Pod turning available lets the controller take a scale-down
	// step (a Deployment: maxUnavailable counts available Pods, and a terminating old Pod is no
	// longer one), so an old Pod's termination never enabled one.
	newPodsEnableDown bool
	stepUp            []bool
}

// seen is the watch receive time among a boundary's stamps, zero when the watch did not see it.
func seen(t phases.Times) time.Time {
	for _, s := range t {
		if s.Source == phases.SourceWatch {
			return s.Time()
		}
	}
	return time.Time{}
}

func timelineOf(r *Rollout) *timeline {
	tl := &timeline{}
	stepOf := map[string]int{}
	for i, s := range r.Steps {
		at, _ := s.Time.Resolve()
		tl.stepTimes = append(tl.stepTimes, at.Time())
		tl.stepSeen = append(tl.stepSeen, seen(s.Time))
		for _, uid := range s.Pods {
			stepOf[uid] = i
		}
	}
	step := func(uid string) int {
		if i, ok := stepOf[uid]; ok {
			return i
		}
		return -1
	}
	minReady := time.Duration(r.Strategy.MinReadySeconds) * time.Second
	for i := range r.NewPods {
		p := &r.NewPods[i]
		c, _ := p.Created.Resolve()
		it := &item{uid: p.UID, start: c.Time(), step: step(p.UID), newPod: p}
		if rd, ok := p.Ready.Resolve(); ok {
			it.readyAt = rd.Time()
			it.end, it.endKnown = rd.Time().Add(minReady), true
			if w := seen(p.Ready); !w.IsZero() {
				it.endSeen = w.Add(minReady)
			}
		}
		if !p.Available.IsZero() {
			it.end, it.endKnown, it.endSeen = p.Available, true, time.Time{}
		}
		tl.list = append(tl.list, it)
	}
	for i := range r.OldPods {
		o := &r.OldPods[i]
		d, _ := o.Deleted.Resolve()
		it := &item{uid: o.UID, start: d.Time(), step: step(o.UID), oldPod: o}
		if g, ok := o.Gone.Resolve(); ok {
			it.end, it.endKnown, it.endSeen = g.Time(), true, seen(o.Gone)
		}
		tl.list = append(tl.list, it)
	}
	sort.SliceStable(tl.list, func(i, j int) bool { return tl.list[i].start.Before(tl.list[j].start) })
	tl.unseenDown = make([]bool, len(r.Steps))
	tl.stepUp = make([]bool, len(r.Steps))
	for i, s := range r.Steps {
		tl.unseenDown[i], tl.stepUp[i] = !s.Up, s.Up
	}
	tl.newPodsEnableDown = r.Workload.Kind == Deployment
	for _, it := range tl.list {
		if it.oldPod != nil && it.step >= 0 {
			tl.unseenDown[it.step] = false
		}
	}
	return tl
}

// waitTime splits time on the critical path between two things readyspan saw (an item's end
// and the next step, the change and the first step) into the controllers' reaction and, from a
// scale-down whose removed Pods were not observed, an unobserved wait for them to go: time the
// trace cannot explain is said to be unobserved, not given to the controllers.
func (tl *timeline) waitTime(from, to time.Time, add func(int, time.Time, time.Time)) {
	cut := to
	for i, unseen := range tl.unseenDown {
		if st := tl.stepTimes[i]; unseen && st.After(from) && st.Before(cut) {
			cut = st
		}
	}
	add(catControllers, from, cut)
	add(catUnobserved, cut, to)
}

func (tl *timeline) earliest() time.Time {
	var t time.Time
	for _, s := range tl.stepTimes {
		if !s.IsZero() && (t.IsZero() || s.Before(t)) {
			t = s
		}
	}
	for _, it := range tl.list {
		if !it.start.IsZero() && (t.IsZero() || it.start.Before(t)) {
			t = it.start
		}
	}
	return t
}

// latest is the last thing seen: the end of the rollout when nothing observed its verdict.
func (tl *timeline) latest(floor time.Time) time.Time {
	t := floor
	for _, s := range tl.stepTimes {
		if s.After(t) {
			t = s
		}
	}
	for _, it := range tl.list {
		if it.endKnown && it.end.After(t) {
			t = it.end
		}
		if it.start.After(t) {
			t = it.start
		}
		if p := it.newPod; p != nil && p.Trace != nil && len(p.Trace.Spans) > 0 && p.Trace.Spans[0].End.After(t) {
			t = p.Trace.Spans[0].End // a Pod still starting: as far as its own trace goes
		}
	}
	return t
}

type critical struct {
	byCategory [numCategories]time.Duration
	pods       map[string]bool
	steps      map[int]bool
}

// handoffSlack is how much earlier than a step an item may appear to end and still be what
// enabled it: the controller acts on the watch event that the item's end produced, so the two
// are ordered, but the stamps come from different sources.
const handoffSlack = 5 * time.Millisecond

// criticalPath walks back from the end of the rollout. The item that ended last determined
// the end; the step that created or removed it determined when it began; the item that ended
// last before that step is what let the controller take it (a Pod turning available frees room
// under maxUnavailable or maxSurge, an old Pod gone makes room for the next); and so on back to
// the change. Time between an item's end and the next step, and between a step and the item it
// caused, is the controllers'; a new Pod's own time is split by its trace's phases; an old
// Pod's is termination. Items still open at the end are taken to end there.
func criticalPath(tl *timeline, start, end time.Time) critical {
	cp := critical{pods: map[string]bool{}, steps: map[int]bool{}}
	for _, it := range tl.list {
		if !it.endKnown || it.end.After(end) {
			it.end = end
		}
		if it.start.IsZero() || it.start.Before(start) {
			it.start = clampTime(it.start, start, end)
		}
	}
	// limit is where the part of the path already walked begins: an item that enabled a step
	// stamped up to handoffSlack before the item's end counts only up to that step, so no
	// instant is counted twice.
	limit := end
	add := func(cat int, from, to time.Time) {
		from, to = clampTime(from, start, limit), clampTime(to, start, limit)
		if to.After(from) {
			cp.byCategory[cat] += to.Sub(from)
		}
	}
	var cur *item
	for _, it := range tl.list {
		if cur == nil || it.end.After(cur.end) {
			cur = it
		}
	}
	if cur == nil {
		add(catControllers, start, end)
		return cp
	}
	tl.waitTime(cur.end, end, add)
	known := tl.byEnd(start)
	visited := map[*item]bool{}
	for cur != nil {
		visited[cur] = true
		cp.pods[cur.uid] = true
		podTime(cur, add)
		t := cur.start
		if cur.step >= 0 && cur.step < len(tl.stepTimes) && !tl.stepTimes[cur.step].IsZero() {
			cp.steps[cur.step] = true
			st := tl.stepTimes[cur.step]
			if st.Before(t) {
				add(catControllers, st, t)
				t = st
			}
		}
		pred := tl.predecessor(known, visited, cur, t)
		if pred == nil {
			tl.waitTime(start, t, add)
			break
		}
		limit = clampTime(t, start, end)
		tl.waitTime(pred.end, t, add)
		cur = pred
	}
	return cp
}

// byEnd lists the candidates to have enabled a step, by end (ties: the earlier-starting first
// when walking back), so that each step's predecessor is a binary search away.
func (tl *timeline) byEnd(start time.Time) []*item {
	known := make([]*item, 0, len(tl.list))
	order := map[*item]int{}
	for i, it := range tl.list {
		order[it] = i
		if it.endKnown && it.end.After(start) {
			known = append(known, it)
		}
	}
	sort.SliceStable(known, func(i, j int) bool {
		if !known[i].end.Equal(known[j].end) {
			return known[i].end.Before(known[j].end)
		}
		return order[known[i]] > order[known[j]]
	})
	return known
}

// predecessor is the item not yet on the path that ended last before cur's step at t: what
// let the controller take it. An end that readyspan saw on its own watch no later than it saw
// the step's Event qualifies too, even if its stamp (a receive time, an upper bound) falls after
// the controller's stamp of the step: the controller acts on the change before it writes the
// Event, and readyspan's two receive times share one clock, so a slow readyspan cannot reorder
// cause and effect. nil when there is none.
func (tl *timeline) predecessor(known []*item, visited map[*item]bool, cur *item, t time.Time) *item {
	bound := t.Add(handoffSlack)
	var stepSeen time.Time // zero when the item has no step, or its Event was not watched
	if cur.step >= 0 && cur.step < len(tl.stepSeen) {
		stepSeen = tl.stepSeen[cur.step]
	}
	searchTo := bound
	if stepSeen.After(searchTo) {
		searchTo = stepSeen
	}
	downStep := cur.step >= 0 && cur.step < len(tl.stepUp) && !tl.stepUp[cur.step] && tl.newPodsEnableDown
	for i := sort.Search(len(known), func(i int) bool { return known[i].end.After(searchTo) }) - 1; i >= 0; i-- {
		k := known[i]
		if visited[k] || k.end.After(bound) && (k.endSeen.IsZero() || k.endSeen.After(stepSeen)) || downStep && k.oldPod != nil {
			continue
		}
		return k
	}
	return nil
}

// podTime counts one critical item's interval by its Segments, as the Gantt charts draw it.
func podTime(it *item, add func(int, time.Time, time.Time)) {
	for _, sg := range segmentsOf(it) {
		add(sg.cat, sg.From, sg.To)
	}
}

// spansIn is the intervals of a trace's spans of one category (phases' span catalogue).
func spansIn(t *phases.Trace, cat phases.Category) []interval {
	var out []interval
	for i := range t.Spans {
		if phases.CategoryOf(t.Spans[i].Name) == cat {
			out = append(out, interval{t.Spans[i].Start, t.Spans[i].End})
		}
	}
	return out
}

func clampTime(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}

type interval struct{ from, to time.Time }

func (a interval) length() time.Duration {
	if a.to.After(a.from) {
		return a.to.Sub(a.from)
	}
	return 0
}

func (a interval) intersect(b interval) interval {
	out := a
	if b.from.After(out.from) {
		out.from = b.from
	}
	if b.to.Before(out.to) {
		out.to = b.to
	}
	if !out.to.After(out.from) {
		return interval{}
	}
	return out
}

// merge returns the union of intervals, sorted and disjoint.
func merge(ivs []interval) []interval {
	var in []interval
	for _, iv := range ivs {
		if iv.length() > 0 {
			in = append(in, iv)
		}
	}
	sort.Slice(in, func(i, j int) bool { return in[i].from.Before(in[j].from) })
	var out []interval
	for _, iv := range in {
		if n := len(out); n > 0 && !iv.from.After(out[n-1].to) {
			if iv.to.After(out[n-1].to) {
				out[n-1].to = iv.to
			}
			continue
		}
		out = append(out, iv)
	}
	return out
}

// intersectAll returns the parts of a (disjoint) that lie in b (disjoint).
func intersectAll(a, b []interval) []interval {
	var out []interval
	for _, x := range a {
		for _, y := range b {
			if z := x.intersect(y); z.length() > 0 {
				out = append(out, z)
			}
		}
	}
	return merge(out)
}

// subtract returns the parts of a (disjoint) outside b (disjoint).
func subtract(a, b []interval) []interval {
	out := append([]interval(nil), a...)
	for _, y := range b {
		var next []interval
		for _, x := range out {
			if z := x.intersect(y); z.length() == 0 {
				next = append(next, x)
				continue
			}
			if y.from.After(x.from) {
				next = append(next, interval{x.from, y.from})
			}
			if y.to.Before(x.to) {
				next = append(next, interval{y.to, x.to})
			}
		}
		out = next
	}
	return out
}

// sentence is the one line that answers "why did this rollout take so long": its length and
// outcome, its waves and the strategy that made them, and the two largest shares of the
// critical path.
func sentence(r *Rollout, sum *Summary) string {
	var b strings.Builder
	b.WriteString(fmtSeconds(sum.Duration))
	switch r.Outcome {
	case OutcomeFailed:
		fmt.Fprintf(&b, ", failed")
		if r.Reason != "" {
			fmt.Fprintf(&b, " (%s)", r.Reason)
		}
	case OutcomeBlocked:
		fmt.Fprintf(&b, ", blocked")
		if r.Reason != "" {
			fmt.Fprintf(&b, " (%s)", r.Reason)
		}
	case OutcomeSuperseded, OutcomePaused, OutcomeInProgress:
		fmt.Fprintf(&b, ", %s", r.Outcome)
	}
	if f := failingWords(r); f != "" {
		b.WriteString(", " + f)
	}
	if w := blockedWords(r); w != "" && r.Outcome != OutcomeBlocked {
		b.WriteString(", " + w)
	}
	if w := nodeWaitWords(r); w != "" {
		b.WriteString(", " + w)
	}
	if w := rotationWords(r); w != "" {
		b.WriteString(", " + w)
	}
	b.WriteString("; ")
	b.WriteString(waves(r, sum))
	if s := strategyWords(r); s != "" {
		fmt.Fprintf(&b, " (%s)", s)
	}
	var total time.Duration
	for _, d := range sum.Critical {
		total += d
	}
	if total <= 0 {
		return b.String()
	}
	order := make([]int, numCategories)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return sum.Critical[order[i]] > sum.Critical[order[j]] })
	var parts []string
	for _, i := range order[:2] {
		pct := int((sum.Critical[i]*100 + total/2) / total)
		if pct == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%d%% %s", pct, Categories[i].Words))
	}
	if len(parts) > 0 {
		b.WriteString("; " + strings.Join(parts, ", "))
	}
	return b.String()
}

// waves describes the scale-up steps: "6 waves of 1", "3 waves of 1–2", "no new Pods".
func waves(r *Rollout, sum *Summary) string {
	lo, hi := int32(-1), int32(-1)
	for _, s := range r.Steps {
		if !s.Up {
			continue
		}
		n := s.Count()
		if lo < 0 || n < lo {
			lo = n
		}
		if n > hi {
			hi = n
		}
	}
	switch {
	case sum.Waves == 0:
		if len(r.OldPods) > 0 {
			return fmt.Sprintf("%d %s removed", len(r.OldPods), plural(len(r.OldPods), "Pod", "Pods"))
		}
		return "no new Pods"
	case lo == hi:
		return fmt.Sprintf("%d %s of %d", sum.Waves, plural(sum.Waves, "wave", "waves"), lo)
	}
	return fmt.Sprintf("%d waves of %d–%d", sum.Waves, lo, hi)
}

func strategyWords(r *Rollout) string {
	s := r.Strategy
	var parts []string
	switch r.Workload.Kind {
	case Deployment:
		if s.Type == "Recreate" {
			return "Recreate"
		}
		if s.MaxSurge != "" {
			parts = append(parts, "maxSurge "+s.MaxSurge)
		}
		if s.MaxUnavailable != "" {
			parts = append(parts, "maxUnavailable "+s.MaxUnavailable)
		}
	case StatefulSet:
		if s.PodManagementPolicy != "" {
			parts = append(parts, s.PodManagementPolicy)
		}
		if s.Partition > 0 {
			parts = append(parts, fmt.Sprintf("partition %d", s.Partition))
		}
	case DaemonSet:
		if s.Type == "OnDelete" {
			return "OnDelete"
		}
		if s.MaxSurge != "" && s.MaxSurge != "0" {
			parts = append(parts, "maxSurge "+s.MaxSurge)
		}
		if s.MaxUnavailable != "" {
			parts = append(parts, "maxUnavailable "+s.MaxUnavailable)
		}
	}
	if s.MinReadySeconds > 0 {
		parts = append(parts, fmt.Sprintf("minReadySeconds %d", s.MinReadySeconds))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func fmtSeconds(d time.Duration) string {
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// failingWords names the failures of the rollout's new Pods that had not reached Ready: "1 Pod
// failing (CrashLoopBackOff)", "3 Pods failing (ErrImagePull ×2, CrashLoopBackOff)".
func failingWords(r *Rollout) string {
	count := map[string]int{}
	var reasons []string
	n := 0
	for i := range r.NewPods {
		tr := r.NewPods[i].Trace
		if tr == nil || tr.Summary.FailureReason == "" {
			continue
		}
		why := tr.Summary.FailureReason
		if count[why] == 0 {
			reasons = append(reasons, why)
		}
		count[why]++
		n++
	}
	if n == 0 {
		return ""
	}
	for i, why := range reasons {
		if count[why] > 1 {
			reasons[i] = fmt.Sprintf("%s ×%d", why, count[why])
		}
	}
	return fmt.Sprintf("%d %s failing (%s)", n, plural(n, "Pod", "Pods"), strings.Join(reasons, ", "))
}

// nodeWaitWords names the new Pods that found no node and waited for one to be added (their
// scheduling.waiting_for_node), and the longest wait: "3 Pods waited for new nodes (up to
// 12.0 s)".
func nodeWaitWords(r *Rollout) string {
	var n int
	var longest time.Duration
	for _, p := range r.NewPods {
		if p.Trace == nil {
			continue
		}
		for _, w := range p.Trace.Summary.SchedulingWaits {
			if w.Kind == phases.WaitNode {
				n++
				longest = max(longest, w.Duration)
			}
		}
	}
	switch n {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("1 Pod waited %s for a new node", fmtSeconds(longest))
	}
	return fmt.Sprintf("%d Pods waited for new nodes (up to %s)", n, fmtSeconds(longest))
}

// blockedWords names the time a rollout that went on spent with its creates refused:
// "blocked 41 s by quota".
func blockedWords(r *Rollout) string {
	var blocked time.Duration
	var class RejectionClass
	for _, j := range r.Rejections {
		if j.Cleared.IsZero() {
			continue
		}
		blocked += j.Cleared.Sub(j.First)
		class = j.Class
	}
	if blocked <= 0 {
		return ""
	}
	return fmt.Sprintf("blocked %s by %s", fmtSeconds(blocked), class)
}
