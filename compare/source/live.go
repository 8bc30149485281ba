package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/readyspan/readyspan/compare"
)

// Live reads windows of a running readyspan's ring through the UI's JSON API: the list of Pods
// (GET /api/v1/pods), then each Pod's view (GET /api/v1/pods/UID) whose startup began in the
// window. The daemon keeps a bounded ring: a window older than it holds is missing, and Live
// says how many Pods it found, never more.
type Live struct {
	// Base is the daemon's address (http://host:8080); Token, when set, is sent as a bearer token
	// (readyspan run with --metrics-secure checks it).
	Base   *url.URL
	Token  string
	Client *http.Client
	// Namespace and Workload narrow the list as the UI's filters do.
	Namespace, Workload string
}

// Bounds of the daemon's answers: the list of a full ring, and one Pod's view.
const (
	maxListBytes = 256 << 20
	maxViewBytes = 16 << 20
	// RequestTimeout bounds each request.
	RequestTimeout = 30 * time.Second
)

// CheckBase checks a --url: http or https, a host, no query.
func CheckBase(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("--url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("--url %q: want http:// or https:// and a host, without a query or credentials", raw)
	}
	return u, nil
}

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
	if err := l.get(ctx, "api/v1/pods", q, maxListBytes, &list); err != nil {
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
		if strings.ContainsAny(s.UID, "/?#%") || s.UID == "" || len(s.UID) > 64 {
			return compare.Set{}, fmt.Errorf("the daemon listed a Pod with UID %q", cutName(s.UID))
		}
		var v podView
		err = l.get(ctx, "api/v1/pods/"+s.UID, nil, maxViewBytes, &v)
		if errors.Is(err, errGone) {
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

var errGone = errors.New("not held")

// get reads one answer of the API into v, at most limit bytes.
func (l *Live) get(ctx context.Context, path string, q url.Values, limit int64, v any) error {
	u := l.Base.JoinPath(path)
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if l.Token != "" {
		req.Header.Set("Authorization", "Bearer "+l.Token)
	}
	client := l.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(path, "api/v1/pods/"):
		return errGone
	case resp.StatusCode != http.StatusOK:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", u.Redacted(), resp.Status, strings.TrimSpace(string(msg)))
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	if int64(len(body)) > limit {
		return fmt.Errorf("GET %s: the answer is larger than %d bytes", u.Redacted(), limit)
	}
	if err := decodeNumbers(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	return nil
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
