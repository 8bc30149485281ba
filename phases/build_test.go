package phases

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 8, 41, 34, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func TestResolve(t *testing.T) {
	tests := []struct {
		name string
		in   Times
		want Stamp
	}{
		{"precise wins", Times{{InstantOf(ms(0)), SourceMetadata}, {InstantOf(ms(430)), SourceEventName}, {InstantOf(ms(440)), SourceWatch}}, Stamp{InstantOf(ms(430)), SourceEventName}},
		{"event time before watch", Times{{InstantOf(ms(500)), SourceWatch}, {InstantOf(ms(474)), SourceEventTime}}, Stamp{InstantOf(ms(474)), SourceEventTime}},
		{"watch beats whole seconds", Times{{InstantOf(ms(0)), SourceStatus}, {InstantOf(ms(620)), SourceWatch}}, Stamp{InstantOf(ms(620)), SourceWatch}},
		{"precise stamp far after its watch time is rejected", Times{{InstantOf(ms(5000)), SourceEventName}, {InstantOf(ms(100)), SourceWatch}}, Stamp{InstantOf(ms(100)), SourceWatch}},
		{"precise stamp outside its whole second is rejected", Times{{InstantOf(ms(4200)), SourceEventName}, {InstantOf(ms(0)), SourceStatus}}, Stamp{InstantOf(ms(0)), SourceStatus}},
		{"only whole seconds", Times{{InstantOf(ms(1000)), SourceStatus}}, Stamp{InstantOf(ms(1000)), SourceStatus}},
		{"equally trusted: the earliest", Times{{InstantOf(ms(450)), SourceEventName}, {InstantOf(ms(430)), SourceEventTime}, {InstantOf(ms(900)), SourceWatch}}, Stamp{InstantOf(ms(430)), SourceEventTime}},
		{"the earliest precise one is outside a window: the next", Times{{InstantOf(ms(2000)), SourceStatus}, {InstantOf(ms(400)), SourceEventName}, {InstantOf(ms(2100)), SourceEventTime}}, Stamp{InstantOf(ms(2100)), SourceEventTime}},
		{"more stamps than are ordered on the stack", Times{{InstantOf(ms(9000)), SourceStatus}, {InstantOf(ms(9000)), SourceMetadata}, {InstantOf(ms(9000)), SourceEventSeconds},
			{InstantOf(ms(9001)), SourceWatch}, {InstantOf(ms(9002)), SourceWatch}, {InstantOf(ms(9003)), SourceWatch}, {InstantOf(ms(9004)), SourceWatch}, {InstantOf(ms(9005)), SourceWatch},
			{InstantOf(ms(9006)), SourceWatch}, {InstantOf(ms(10)), SourceEventTime}, {InstantOf(ms(9400)), SourceEventName}}, Stamp{InstantOf(ms(9400)), SourceEventName}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.in.Resolve()
			if !ok || got != tt.want {
				t.Fatalf("got %v %v, want %v", got, ok, tt.want)
			}
		})
	}
	if _, ok := (Times{}).Resolve(); ok {
		t.Fatal("empty Times resolved")
	}
}

// TestNanoOf: stamps are compared in nanoseconds; a time a clock states keeps its exact value,
// and one no clock states (a malformed object's year 3000 or year 1000) still orders after or
// before every real time instead of wrapping around.
func TestNanoOf(t *testing.T) {
	now := time.Date(2026, 11, 30, 8, 41, 34, 436207463, time.UTC)
	if got := nanoOf(now); got != now.UnixNano() {
		t.Fatalf("nanoOf(%v) = %d, want %d", now, got, now.UnixNano())
	}
	tests := []struct {
		name  string
		at    time.Time
		after bool // orders after now
	}{
		{"year 3000", time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"year 2200", time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC), true},
		{"year 1000", time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC), false},
		{"the zero time", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nanoOf(tt.at)
			if (got > nanoOf(now)) != tt.after {
				t.Errorf("nanoOf(%v) = %d: after %v is %v, want %v", tt.at, got, now, got > nanoOf(now), tt.after)
			}
			if d := nanoOf(now) - got; (d < 0) != tt.after { // the difference does not overflow
				t.Errorf("%v − %v = %d ns: wrong sign", now, tt.at, d)
			}
		})
	}
}

// TestStampTimes: a stamp keeps its time to the nanosecond whatever location it was read in,
// two readings of one instant are one observation, the zero time is none, and a malformed
// object's time beyond what nanoseconds span still orders where it belongs (InstantOf,
// InstantOfNano).
func TestStampTimes(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 41, 34, 436207463, time.UTC)
	if got := StampOf(at, SourceEventName).Time(); !got.Equal(at) {
		t.Fatalf("StampOf(%v).Time() = %v", at, got)
	}
	var ts Times
	ts.Add(at, SourceWatch)
	ts.Add(at.In(time.FixedZone("UTC+2", 2*3600)), SourceWatch) // the same instant
	ts.Add(time.Time{}, SourceWatch)
	ts.AddInstant(0, SourceWatch)
	if len(ts) != 1 {
		t.Fatalf("one instant added three ways and two zero times: %d stamps, want 1", len(ts))
	}
	if got := InstantOf(time.Time{}); !got.IsZero() || !got.Time().IsZero() {
		t.Errorf("InstantOf(zero time) = %d, want none", got)
	}
	far := []struct {
		name  string
		at    Instant
		after bool
	}{
		{"year 3000", InstantOf(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)), true},
		{"year 1000", InstantOf(time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)), false},
		{"the largest int64", InstantOfNano(math.MaxInt64), true},
		{"the smallest int64", InstantOfNano(math.MinInt64), false},
	}
	for _, f := range far {
		if (f.at > InstantOf(at)) != f.after || f.at.IsZero() {
			t.Errorf("%s: instant %d, after %v: %v, want %v", f.name, f.at, at, f.at > InstantOf(at), f.after)
		}
		if d := f.at - InstantOf(at); (d > 0) != f.after { // the difference does not overflow
			t.Errorf("%s − %v = %d ns: wrong sign", f.name, at, d)
		}
		ts := Times{{At: f.at, Source: SourceEventName}, StampOf(at, SourceStatus)}
		if s, _ := ts.Resolve(); s.Source != SourceStatus {
			t.Errorf("%s: resolved to %v from %v, want the status stamp", f.name, s.Source, f.name)
		}
	}
}

// TestUUIDBytes holds uuidBytes to encoding/hex on the UID less its dashes, for random strings
// of hex digits in either case, dashes and bytes that are neither (among them the control
// bytes and punctuation next to the digits and letters in ASCII).
func TestUUIDBytes(t *testing.T) {
	const alphabet = "0123456789abcdefABCDEF-----gG/:@`\x00\x10\x20\xff"
	rnd := rand.New(rand.NewPCG(1, 2))
	decoded := 0
	for range 100000 {
		b := make([]byte, 30+rnd.IntN(10))
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
			if rnd.IntN(4) > 0 { // mostly lowercase digits, so that many decode
				b[i] = "0123456789abcdef"[rnd.IntN(16)]
			}
		}
		uid := string(b)
		want, err := hex.DecodeString(strings.ReplaceAll(uid, "-", ""))
		got, ok := uuidBytes(uid)
		if wantOK := err == nil && len(want) == len(got); ok != wantOK || ok && !bytes.Equal(got[:], want) {
			t.Fatalf("uuidBytes(%q) = %x, %v; encoding/hex: %x, %v", uid, got, ok, want, err)
		}
		if ok {
			decoded++
		}
	}
	if decoded < 1000 {
		t.Fatalf("only %d of the random UIDs decode: the test proves little", decoded)
	}
}

func TestTraceAndSpanIDs(t *testing.T) {
	if got := TraceIDFor("9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f").String(); got != "9cade20b81ea4be9bdc9d3f2d8d8b69f" {
		t.Fatalf("trace ID %s", got)
	}
	if a, b := TraceIDFor("not-a-uuid"), TraceIDFor("not-a-uuid"); a != b || a == (TraceID{}) {
		t.Fatal("non-UUID UIDs must hash deterministically")
	}
	if a, b := SpanIDFor("u", "kubelet"), SpanIDFor("u", "kubelet"); a != b || a == SpanIDFor("u", "status") {
		t.Fatal("span IDs must be distinct per path and stable")
	}
	// A UID is read as a UUID once its dashes are dropped, wherever they stand and in either
	// case; anything else is hashed.
	hashed := func(uid string) TraceID {
		var id TraceID
		sum := sha256.Sum256([]byte(uid))
		copy(id[:], sum[:16])
		return id
	}
	for uid, want := range map[string]string{
		"9CADE20B-81EA-4BE9-BDC9-D3F2D8D8B69F": "9cade20b81ea4be9bdc9d3f2d8d8b69f",
		"9cade20b81ea4be9bdc9d3f2d8d8b69f":     "9cade20b81ea4be9bdc9d3f2d8d8b69f",
		"-9cade20b81ea4be9bdc9d3f2d8d8b6--9f-": "9cade20b81ea4be9bdc9d3f2d8d8b69f",
	} {
		if got := TraceIDFor(uid).String(); got != want {
			t.Errorf("TraceIDFor(%q) = %s, want %s", uid, got, want)
		}
	}
	for _, uid := range []string{"", "9cade20b-81ea-4be9-bdc9-d3f2d8d8b69", "9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f0", "9cade20b-81ea-4be9-bdc9-d3f2d8d8b69g"} {
		if got := TraceIDFor(uid); got != hashed(uid) {
			t.Errorf("TraceIDFor(%q) = %s, want the hash", uid, got)
		}
	}
	long := strings.Repeat("p", 300) // beyond the stack buffer: hashed all the same
	if a, b := SpanIDFor("u", long), SpanIDFor("u", long); a != b || a == SpanIDFor("u", long+"x") {
		t.Fatal("span IDs of long paths must be distinct and stable")
	}
	// Another version of readyspan, or the other replica, must give the same IDs: the first
	// 8 bytes, big-endian, of FNV-1a 64 of UID, NUL, path (the standard library's) spread by
	// SplitMix64's finaliser.
	for _, c := range []struct{ uid, path string }{{"u", "kubelet"}, {"9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f", RootSpanName}, {"", ""}, {"u", long}} {
		h := fnv.New64a()
		h.Write([]byte(c.uid + "\x00" + c.path))
		x := h.Sum64()
		x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
		x = (x ^ x>>27) * 0x94d049bb133111eb
		x ^= x >> 31
		var want SpanID
		binary.BigEndian.PutUint64(want[:], x)
		if got := SpanIDFor(c.uid, c.path); got != want || got.IsZero() {
			t.Errorf("SpanIDFor(%q, %.20q) = %s, want %s", c.uid, c.path, got, want)
		}
	}
}

// TestPhaseTable: the table that drives the phases lists them in the order of Phases, as many as
// Summary's arrays hold (they are indexed like both), and each phase starts where the one
// before it ended.
func TestPhaseTable(t *testing.T) {
	if len(phaseTable) != len(Phases) || len(phaseTable) != len(Summary{}.PhaseDurations) {
		t.Fatalf("%d phases in the table, %d in Phases, %d in Summary", len(phaseTable), len(Phases), len(Summary{}.PhaseDurations))
	}
	from := requestSent
	for i, ph := range phaseTable {
		if ph.name != Phases[i] || phaseIndex(ph.name) != i {
			t.Errorf("phase %d is %q, Phases says %q", i, ph.name, Phases[i])
		}
		if ph.from != from || ph.to <= ph.from {
			t.Errorf("%s runs %d → %d, want it to start at %d and move forward", ph.name, ph.from, ph.to, from)
		}
		from = ph.to
	}
	if from != podServing {
		t.Errorf("the phases end at boundary %d, want the chain's end %d", from, podServing)
	}
}

func TestMergedLength(t *testing.T) {
	in := func(n int) Instant { return InstantOf(ms(n)) }
	iv := [][2]Instant{{in(0), in(1000)}, {in(500), in(1500)}, {in(3000), in(3500)}}
	if got := mergedLength(iv); got != 2000*time.Millisecond {
		t.Fatalf("merged %v, want 2s (overlapping pulls counted once)", got)
	}
}

// minimal returns the observation of a bare Pod that went Ready, with watch times.
func minimal() *Pod {
	p := &Pod{UID: "9cade20b-81ea-4be9-bdc9-d3f2d8d8b69f", Name: "web", Namespace: "default", Root: RootBarePod}
	p.Created.Add(ms(0), SourceMetadata)
	p.Created.Add(ms(3), SourceWatch)
	p.Scheduled.Add(ms(40), SourceEventTime)
	p.SandboxReady.Add(ms(700), SourceWatch)
	c := Container{Name: "web", Image: "busybox", HasReadinessProbe: true, Cache: "cold", PullTransfer: 3999 * time.Millisecond, PullTotal: 4 * time.Second}
	c.PullStarted.Add(ms(760), SourceEventName)
	c.PullFinished.Add(ms(4760), SourceEventName)
	c.Created.Add(ms(4800), SourceEventName)
	c.Started.Add(ms(4900), SourceEventName)
	c.ReadyAt.Add(ms(6000), SourceWatch)
	p.Containers = []Container{c}
	p.ContainersReady.Add(ms(6000), SourceWatch)
	p.Running.Add(ms(5800), SourceWatch)
	p.Ready.Add(ms(6001), SourceWatch)
	return p
}

func TestBuildSummary(t *testing.T) {
	tr := Build(minimal(), Options{})
	s := tr.Summary
	if s.Outcome != OutcomeReady || s.Startup != 5998*time.Millisecond {
		t.Fatalf("summary %+v", s)
	}
	// Created is best seen by the watch (3 ms); SLI: created → started minus the 4 s pull.
	if !s.SLIEligible || s.SLI != 897*time.Millisecond {
		t.Fatalf("SLI %v eligible=%v, want 897ms", s.SLI, s.SLIEligible)
	}
	if len(s.ColdPulls) != 1 || s.ColdPulls[0] != 4*time.Second || s.PullsPulled != 1 {
		t.Fatalf("pulls %+v", s)
	}
	if s.PhaseObserved[0] || s.PhaseObserved[1] || s.PhaseObserved[2] {
		t.Fatal("submit/apiserver without audit data and controllers of a bare Pod are not measured")
	}
	if !s.PhaseObserved[3] || s.PhaseDurations[3] != 37*time.Millisecond {
		t.Fatalf("scheduling %v observed=%v, want 37ms from the watch ADDED to the bind", s.PhaseDurations[3], s.PhaseObserved[3])
	}
	if st := Build(minimal(), Options{Stateful: true}).Summary; st.SLIEligible {
		t.Fatal("stateful Pods are excluded from the SLI")
	}
}

// TestBuildDoesNotMutateInput compares the whole input before and after Build. The inputs make
// Build do what could write through to them: sort every Times (stamps out of rank order),
// correct a kubelet clock running ahead (shifted stamps and occurrences), drop clamped
// boundaries, walk init containers and occurrences.
func TestBuildDoesNotMutateInput(t *testing.T) {
	skewed := minimal()
	skewed.Created = Times{{InstantOf(ms(3)), SourceWatch}, {InstantOf(ms(0)), SourceMetadata}, {InstantOf(ms(1)), SourceEventName}}
	skewed.Containers[0].PullStarted = Times{{InstantOf(ms(700)), SourceWatch}, {InstantOf(ms(2760)), SourceEventName}}
	skewed.Containers[0].Failures = []Occurrence{{Time: Stamp{InstantOf(ms(5000)), SourceEventName}, Reason: "BackOff", Count: 2, Last: ms(5500)}}
	skewed.PodWarnings = []Occurrence{{Time: Stamp{InstantOf(ms(650)), SourceEventName}, Reason: "FailedMount", Message: "not yet"}}
	skewed.SchedulingFailure = []Occurrence{{Time: Stamp{InstantOf(ms(20)), SourceEventTime}, Reason: "FailedScheduling", Count: 1}}
	init := Container{Name: "init", Image: "busybox", Init: true}
	init.Started.Add(ms(720), SourceEventName)
	init.Finished.Add(ms(0), SourceStatus)
	skewed.Containers = append([]Container{init}, skewed.Containers...)

	failed := minimal()
	failed.Outcome, failed.End, failed.FailureReason = OutcomeFailed, ms(9000), "ImagePullBackOff"
	failed.Containers[0].PullFinished = nil
	failed.Containers[0].PullFailures = []Occurrence{{Time: Stamp{InstantOf(ms(800)), SourceEventName}, Reason: "ErrImagePull"}}

	for name, p := range map[string]*Pod{"skewed clocks, init container": skewed, "failed pull": failed} {
		t.Run(name, func(t *testing.T) {
			before := deepCopy(t, p)
			if !reflect.DeepEqual(before, p) {
				t.Fatal("the copy differs from the input before Build: the comparison would prove nothing")
			}
			Build(p, Options{})
			if !reflect.DeepEqual(before, p) {
				t.Fatalf("Build changed its input:\nbefore %+v\nafter  %+v", before, p)
			}
		})
	}
}

// deepCopy copies a Pod through JSON: every field of Pod is exported, so nothing is shared
// with the original.
func deepCopy(t *testing.T, p *Pod) *Pod {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var out Pod
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestSkewCorrection(t *testing.T) {
	p := minimal()
	// The kubelet's clock runs 2 s ahead: its event names say 2 s later than readyspan saw them.
	for i := range p.Containers {
		c := &p.Containers[i]
		for _, ts := range []*Times{&c.PullStarted, &c.PullFinished, &c.Created, &c.Started} {
			(*ts)[0].At = InstantOf((*ts)[0].Time().Add(2 * time.Second))
			ts.Add((*ts)[0].Time().Add(-2*time.Second+5*time.Millisecond), SourceWatch)
		}
	}
	tr := Build(p, Options{})
	if v, _ := tr.Root().Attr(AttrKubeletAhead).(int64); v != 1995 {
		t.Fatalf("kubelet ahead %v ms, want 1995", tr.Root().Attr(AttrKubeletAhead))
	}
	pull := tr.Find("container/web/image_pull")
	if !pull.Start.Equal(ms(765)) {
		t.Fatalf("corrected pull start %v, want %v", pull.Start, ms(765))
	}
}

// BenchmarkBuild builds one Pod's trace from its observations per op; pods/s is how many Pods
// one core reconstructs a second, without correlation (BenchmarkCorrelator* in tracer add it).
func BenchmarkBuild(b *testing.B) {
	p := minimal()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Build(p, Options{})
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
}

// BenchmarkBuildChain is BenchmarkBuild for a Deployment's Pod: two workloads in its chain, each
// drawn as a step and named on the root by names derived from its kind.
func BenchmarkBuildChain(b *testing.B) {
	p := minimal()
	p.Root = RootOf("Deployment")
	p.Controllers = []Controller{{Kind: "Deployment", Name: "web"},
		{Kind: "ReplicaSet", Name: "web-7d4b9", Reached: p.Created, ReachedBy: "scaled up"}}
	p.RootPersisted = p.Created
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Build(p, Options{})
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pods/s")
}

// TestSpanNotes: a span without events or links reads none, adding makes room once, and a copy
// given DropNotes gets its own instead of adding to the original's.
func TestSpanNotes(t *testing.T) {
	var s Span
	if s.Events() != nil || s.Links() != nil {
		t.Fatal("a new span has events or links")
	}
	s.AddEvent()
	if s.notes != nil {
		t.Error("adding no event made room for notes")
	}
	s.AddEvent(Event{Name: "FailedScheduling"})
	s.AddLink(Link{TraceID: TraceID{1}})
	c := s
	c.DropNotes()
	c.AddEvent(Event{Name: "Preempted"})
	if len(s.Events()) != 1 || s.Events()[0].Name != "FailedScheduling" || len(s.Links()) != 1 {
		t.Errorf("the original's notes after the copy's: events %+v, links %+v", s.Events(), s.Links())
	}
	if len(c.Events()) != 1 || c.Events()[0].Name != "Preempted" || c.Links() != nil {
		t.Errorf("the copy's notes: events %+v, links %+v", c.Events(), c.Links())
	}
}
