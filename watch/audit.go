package watch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AuditEntry is what readyspan reads from one kube-apiserver audit event (audit.k8s.io/v1,
// JSON lines, the log backend's format): when the apiserver received a write and when it
// answered. With it, the apiserver phase of a Deployment change or a bare Pod is measured
// (µs, apiserver clock) instead of unobserved.
type AuditEntry struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp  time.Time `json:"stageTimestamp"`
}

// relevant reports whether the entry is a successful client write readyspan can use: one its
// kind's registry entry names (a workload's change, a bare Pod's creation).
func (a *AuditEntry) relevant(r *Registry) bool {
	if a.Stage != "ResponseComplete" || a.ObjectRef == nil || a.ObjectRef.Name == "" {
		return false
	}
	if a.ResponseStatus == nil || a.ResponseStatus.Code < 200 || a.ResponseStatus.Code > 299 {
		return false
	}
	k := r.byGR[schema.GroupResource{Group: a.ObjectRef.APIGroup, Resource: a.ObjectRef.Resource}]
	if k == nil || k.Audit == nil || !slices.Contains(k.Audit.Verbs, a.Verb) {
		return false
	}
	return a.ObjectRef.Subresource == "" || slices.Contains(k.Audit.Subresources, a.ObjectRef.Subresource)
}

// Key is what the writes to the entry's object are kept under (AuditKey).
func (a *AuditEntry) Key() string {
	return AuditKey(a.ObjectRef.Resource, a.ObjectRef.Namespace, a.ObjectRef.Name)
}

// AuditKey is the key the writes to an object are kept under: "resource/namespace/name".
func AuditKey(resource, namespace, name string) string {
	return resource + "/" + namespace + "/" + name
}

// Client is the product name of the user agent: "kubectl/v1.37.2 (linux/amd64) …" → kubectl.
func (a *AuditEntry) Client() string {
	c, _, _ := strings.Cut(a.UserAgent, "/")
	return strings.TrimSpace(c)
}

// ParseAuditLine parses one audit log line. Lines that are not audit events are errors; events
// readyspan has no use for return (nil, nil).
func (r *Registry) ParseAuditLine(line []byte) (*AuditEntry, error) {
	var a AuditEntry
	if err := json.Unmarshal(line, &a); err != nil {
		return nil, fmt.Errorf("not an audit event: %w", err)
	}
	if !a.relevant(r) {
		return nil, nil
	}
	if a.RequestReceived.IsZero() || a.StageTimestamp.Before(a.RequestReceived) {
		return nil, fmt.Errorf("audit event for %s has inconsistent timestamps", a.Key())
	}
	return &a, nil
}

// auditTail is how much of an existing audit log is read at start: enough for the Pods still
// starting, without reading a huge log from its beginning.
const auditTail = 64 << 20

// TailAudit follows an audit log file and sends the entries readyspan uses as Deltas, until ctx
// ends. It reopens the file when it is rotated or truncated. Unreadable lines are counted
// through errs and skipped.
func (r *Registry) TailAudit(ctx context.Context, path string, out chan<- Delta, errs Errors, log *slog.Logger) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	defer func() { f.Close() }()
	if fi, err := f.Stat(); err == nil && fi.Size() > auditTail {
		if _, err := f.Seek(fi.Size()-auditTail, io.SeekStart); err != nil {
			return fmt.Errorf("seek audit log: %w", err)
		}
	}
	br := bufio.NewReaderSize(f, 1<<20)
	var partial []byte
	var offset int64
	if o, err := f.Seek(0, io.SeekCurrent); err == nil {
		offset = o
	}
	skipFirst := offset > 0 // the first line after a seek is cut
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		line, err := br.ReadBytes('\n')
		offset += int64(len(line))
		if errors.Is(err, io.EOF) {
			partial = append(partial, line...)
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
			// Rotated or truncated: start over on the file now at path.
			if fi, serr := os.Stat(path); serr == nil {
				cur, _ := f.Stat()
				if !os.SameFile(fi, cur) || fi.Size() < offset {
					nf, oerr := os.Open(path)
					if oerr == nil {
						f.Close()
						f, br, offset, partial = nf, bufio.NewReaderSize(nf, 1<<20), 0, nil
					}
				}
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("read audit log: %w", err)
		}
		if len(partial) > 0 {
			line = append(partial, line...)
			partial = nil
		}
		if skipFirst {
			skipFirst = false
			continue
		}
		a, perr := r.ParseAuditLine(line)
		if perr != nil {
			if errs != nil {
				errs.WatchError("audit", "unreadable")
			}
			log.Debug("Skipping audit line", "err", perr)
			continue
		}
		if a == nil {
			continue
		}
		select {
		case out <- Delta{Resource: ResourceAudit, Type: Added, Audit: a, Recv: time.Now()}:
		case <-ctx.Done():
			return nil
		}
	}
}
