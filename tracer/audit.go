package tracer

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

	"github.com/readyspan/readyspan/phases"
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
func (a *AuditEntry) relevant() bool {
	if a.Stage != "ResponseComplete" || a.ObjectRef == nil || a.ObjectRef.Name == "" {
		return false
	}
	if a.ResponseStatus == nil || a.ResponseStatus.Code < 200 || a.ResponseStatus.Code > 299 {
		return false
	}
	k := kindByGR[schema.GroupResource{Group: a.ObjectRef.APIGroup, Resource: a.ObjectRef.Resource}]
	if k == nil || k.audit == nil || !slices.Contains(k.audit.verbs, a.Verb) {
		return false
	}
	return a.ObjectRef.Subresource == "" || slices.Contains(k.audit.subresources, a.ObjectRef.Subresource)
}

func (a *AuditEntry) key() string {
	return auditKey(a.ObjectRef.Resource, a.ObjectRef.Namespace, a.ObjectRef.Name)
}

// auditKey is the key the writes to an object are kept under: "resource/namespace/name".
func auditKey(resource, namespace, name string) string {
	return resource + "/" + namespace + "/" + name
}

// client is the product name of the user agent: "kubectl/v1.37.2 (linux/amd64) …" → kubectl.
func (a *AuditEntry) client() string {
	c, _, _ := strings.Cut(a.UserAgent, "/")
	return strings.TrimSpace(c)
}

// ParseAuditLine parses one audit log line. Lines that are not audit events are errors; events
// readyspan has no use for return (nil, nil).
func ParseAuditLine(line []byte) (*AuditEntry, error) {
	var a AuditEntry
	if err := json.Unmarshal(line, &a); err != nil {
		return nil, fmt.Errorf("not an audit event: %w", err)
	}
	if !a.relevant() {
		return nil, nil
	}
	if a.RequestReceived.IsZero() || a.StageTimestamp.Before(a.RequestReceived) {
		return nil, fmt.Errorf("audit event for %s has inconsistent timestamps", a.key())
	}
	return &a, nil
}

// maxAuditPerKey bounds the writes remembered per object.
const maxAuditPerKey = 8

func (c *Correlator) handleAudit(a *AuditEntry) {
	k := a.key()
	list := append(c.audit[k], a)
	if len(list) > maxAuditPerKey {
		list = list[len(list)-maxAuditPerKey:]
	}
	c.audit[k] = list
}

// auditFor returns the last client write of an object received no later than before, a
// whole-second stamp (a creationTimestamp, an Event's lastTimestamp) or a receive time, plus its
// second. The receipt is what bounds it: the apiserver stamps the object while it handles the
// request, so a write stamped at 12:00:58.995 whose answer left at 12:00:59.020 is still the
// write of an object created "12:00:58".
func (c *Correlator) auditFor(resource, namespace, name string, before time.Time) *AuditEntry {
	if len(c.audit) == 0 {
		return nil // no audit log read: no key to build, for every Pod traced
	}
	list := c.audit[auditKey(resource, namespace, name)]
	for i := len(list) - 1; i >= 0; i-- {
		a := list[i]
		if a.client() == controllerManager {
			continue
		}
		if before.IsZero() || !a.RequestReceived.After(before.Add(time.Second)) {
			return a
		}
	}
	return nil
}

func applyAudit(obs *phases.Pod, a *AuditEntry) {
	if a == nil {
		return
	}
	obs.AuditReceived.Add(a.RequestReceived, phases.SourceAudit)
	obs.AuditPersisted.Add(a.StageTimestamp, phases.SourceAudit)
	if obs.Client == "" || obs.Client == "kubectl-client-side-apply" || obs.Client == "kubectl-create" {
		obs.Client = a.client()
	}
}

// auditTail is how much of an existing audit log is read at start: enough for the Pods still
// starting, without reading a huge log from its beginning.
const auditTail = 64 << 20

// TailAudit follows an audit log file and sends the entries readyspan uses as Deltas, until ctx
// ends. It reopens the file when it is rotated or truncated. Unreadable lines are counted
// through errs and skipped.
func TailAudit(ctx context.Context, path string, out chan<- Delta, errs WatchErrors, log *slog.Logger) error {
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
	r := bufio.NewReaderSize(f, 1<<20)
	var partial []byte
	var offset int64
	if o, err := f.Seek(0, io.SeekCurrent); err == nil {
		offset = o
	}
	skipFirst := offset > 0 // the first line after a seek is cut
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		line, err := r.ReadBytes('\n')
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
						f, r, offset, partial = nf, bufio.NewReaderSize(nf, 1<<20), 0, nil
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
		a, perr := ParseAuditLine(line)
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
