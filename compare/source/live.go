package source

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/readyspan/readyspan/compare"
	"github.com/readyspan/readyspan/web/apiclient"
)

// Live reads windows of a running readyspan's ring through the UI's JSON API: the list of Pods
// (GET /api/v1/pods), then each Pod's view (GET /api/v1/pods/UID) whose startup began in the
// window. The daemon keeps a bounded ring: a window older than it holds is missing, and Live
// says how many Pods it found, never more.
type Live struct {
	API *apiclient.Client
	// Namespace and Workload narrow the list as the UI's filters do.
	Namespace, Workload string
}

// Bounds of the daemon's answers: the list of a full ring, and one Pod's view.
const (
	maxListBytes = 256 << 20
	maxViewBytes = 16 << 20
)

// podSummary is a line of GET /api/v1/pods (web.PodSummary): the fields read.
type podSummary struct {
	UID   string `json:"uid"`
	Start string `json:"start"`
}

// Window reads the Pods whose startup began in [since, until).
func (l *Live) Window(ctx context.Context, label string, since, until time.Time) (compare.Set, error) {
	q := url.Values{}
	if l.Namespace != "" {
		q.Set("namespace", l.Namespace)
	}
	if l.Workload != "" {
		q.Set("workload", l.Workload)
	}
	var list []podSummary
	if err := l.API.Get(ctx, "api/v1/pods", q, maxListBytes, &list); err != nil {
		return compare.Set{}, err
	}
	add := newAdder(label)
	for _, s := range list {
		start, err := time.Parse(time.RFC3339Nano, s.Start)
		if err != nil {
			return compare.Set{}, fmt.Errorf("the daemon listed Pod %q with start %q", cutName(s.UID), cutName(s.Start))
		}
		if start.Before(since) || !start.Before(until) {
			continue
		}
		if err := apiclient.CheckID(s.UID); err != nil {
			return compare.Set{}, err
		}
		var v podView
		err = l.API.Get(ctx, "api/v1/pods/"+s.UID, nil, maxViewBytes, &v)
		if errors.Is(err, apiclient.ErrNotHeld) {
			continue // it left the ring between the list and now
		}
		if err != nil {
			return compare.Set{}, err
		}
		if err := addView(&v, add); err != nil {
			return compare.Set{}, fmt.Errorf("the Pod with UID %s: %w", cutName(s.UID), err)
		}
	}
	return add.result(), nil
}

// ParseWindow reads a side written SINCE..UNTIL: each an RFC 3339 time, a time before now
// (now-2h) or now.
func ParseWindow(s string, now time.Time) (since, until time.Time, ok bool, err error) {
	a, b, found := strings.Cut(s, "..")
	if !found {
		return time.Time{}, time.Time{}, false, nil
	}
	if since, err = parseTime(a, now); err == nil {
		until, err = parseTime(b, now)
	}
	if err == nil && !since.Before(until) {
		err = fmt.Errorf("window %q ends before it starts", s)
	}
	return since, until, true, err
}

func parseTime(s string, now time.Time) (time.Time, error) {
	if s == "now" {
		return now, nil
	}
	if ago, ok := strings.CutPrefix(s, "now-"); ok {
		d, err := time.ParseDuration(ago)
		if err != nil || d < 0 {
			return time.Time{}, fmt.Errorf("window end %q: want now-DURATION (now-2h)", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("window end %q: want RFC 3339 (2026-12-05T10:00:00Z), now-DURATION or now", s)
	}
	return t, nil
}
