package tracer

import (
	"strconv"
	"strings"

	"github.com/readyspan/readyspan/events"
	"github.com/readyspan/readyspan/rollout"
)

// stepOf reads a scaling action from a controller's Event about a workload, in the format its
// kind's registry entry knows (kind.step). ok is false when the event is not one; known is
// false for a message in a format readyspan does not know.
//
// After ten such messages about one object within ten minutes, client-go's recorder stops
// writing new Events and rewrites one, "(combined from similar events): " and the latest
// message, counting them: each rewrite is one more step.
func stepOf(e *events.Event) (st rollout.Step, ok, known bool) {
	msg := strings.TrimPrefix(e.Message, events.CombinedPrefix)
	st.From, st.To, st.Message = -1, -1, msg
	k := kindNamed(e.Regarding.APIVersion, e.Regarding.Kind)
	if k == nil || k.step == nil {
		return st, false, true
	}
	ok, known = k.step(&st, e.Reason, msg)
	return st, ok, known
}

// scaledReplicaSet reads a ReplicaSet's scaling as a workload controller states it, after the
// prefix that names the ReplicaSet: "NAME from 1 to 2" (the deployment controller) or
// "NAME (revision 2) from 1 to 2" (Argo Rollouts), with the direction the prefix gave.
func scaledReplicaSet(st *rollout.Step, up bool, rest string) (known bool) {
	f := strings.Fields(rest)
	if len(f) == 7 && strings.HasPrefix(f[1], "(revision") && strings.HasSuffix(f[2], ")") {
		f = append(f[:1], f[3:]...)
	}
	if len(f) != 5 || f[1] != "from" || f[3] != "to" {
		return false
	}
	// Unsigned: the controllers print replica counts with %d of values never below zero,
	// and a "-1" here would read as the "not a scale step" sentinel.
	from, err1 := strconv.ParseUint(f[2], 10, 31)
	to, err2 := strconv.ParseUint(f[4], 10, 31)
	if err1 != nil || err2 != nil {
		return false
	}
	st.Up, st.Target, st.From, st.To = up, f[0], int32(from), int32(to)
	return true
}

// scalingReplicaSet reads a ScalingReplicaSet Event's message, whose ReplicaSet follows one of
// the prefixes up or down ("Scaled up replica set ", "Scaled down replica set ").
func scalingReplicaSet(st *rollout.Step, reason, msg, up, down string) (ok, known bool) {
	if reason != "ScalingReplicaSet" {
		return false, true
	}
	if rest, found := strings.CutPrefix(msg, up); found {
		return true, scaledReplicaSet(st, true, rest)
	}
	if rest, found := strings.CutPrefix(msg, down); found {
		return true, scaledReplicaSet(st, false, rest)
	}
	return true, false
}
