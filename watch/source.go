package watch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/readyspan/readyspan/safetext"
)

// SourceConfig is what differs between the commands that watch a cluster (the daemon, watch and
// record): what to watch and where counts and logs go.
type SourceConfig struct {
	Client kubernetes.Interface
	Kinds  *Registry // what is read
	Host   string    // the apiserver, as messages name it
	Watch  Config
	Errs   Errors // counts watch and audit log failures; nil for none
	Log    *slog.Logger

	AuditLog    string      // kube-apiserver audit log to follow into the same stream; "" for none
	AuditFailed func(error) // told when the audit log cannot be read; each command words it its own way

	// Webhooks: watch the admission webhook configurations too (Webhooks), for what takes the
	// names of webhooks from the components' spans (readyspan run --otlp-receive).
	Webhooks bool
}

// Source is the cluster side every live command shares: the informers turning the cluster into
// Deltas and the audit log added to the same stream (Deltas). The steps are separate because
// the commands interleave their own work (serving /readyz, printing) with them.
type Source struct {
	cfg      SourceConfig
	watcher  *Watcher
	webhooks *Webhooks // nil unless SourceConfig.Webhooks
}

// NewSource sets the informers up; nothing talks to the cluster until Start.
func NewSource(cfg SourceConfig) *Source {
	s := &Source{cfg: cfg, watcher: NewWatcher(cfg.Client, cfg.Kinds, cfg.Watch, cfg.Errs, cfg.Log)}
	if cfg.Webhooks {
		s.webhooks = NewWebhooks(cfg.Client, cfg.Errs, cfg.Log)
	}
	return s
}

// Watcher is the Source's informers, for their health (/readyz) and sync.
func (s *Source) Watcher() *Watcher { return s.watcher }

// Webhooks is the Source's watch of the admission webhook configurations; nil unless
// SourceConfig.Webhooks. It is not among what readiness waits for: without it only webhook
// names go unlabelled.
func (s *Source) Webhooks() *Webhooks { return s.webhooks }

// Reachable tells whether the apiserver answers, in the words every command uses.
func (s *Source) Reachable(ctx context.Context) error {
	return Reachable(ctx, s.cfg.Client, s.cfg.Host)
}

// Start starts the informers and, if asked, the webhook configurations' and follows the audit
// log; it returns at once.
func (s *Source) Start(ctx context.Context) {
	s.watcher.Start(ctx)
	if s.webhooks != nil {
		s.webhooks.Start(ctx)
	}
	if s.cfg.AuditLog == "" {
		return
	}
	go func() {
		if err := s.cfg.Kinds.TailAudit(ctx, s.cfg.AuditLog, s.watcher.Sink(), s.cfg.Errs, s.cfg.Log); err != nil && s.cfg.AuditFailed != nil {
			s.cfg.AuditFailed(err)
		}
	}()
}

// StartFor is what the terminal commands (watch, record) do: fail at once on an apiserver that
// does not answer, then start, bounded by d when it is set. The returned context ends with the
// run; cancel it when done.
func (s *Source) StartFor(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc, error) {
	if err := s.Reachable(ctx); err != nil {
		return ctx, func() {}, err
	}
	cancel := context.CancelFunc(func() {})
	if d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
	}
	s.Start(ctx)
	return ctx, cancel, nil
}

// Deltas is the stream of the informers' and the audit log's changes.
func (s *Source) Deltas() <-chan Delta { return s.watcher.Deltas() }

// Reachable asks the apiserver for its version, so an unreachable or refusing apiserver is one
// clear line rather than a stream of informer retries.
func Reachable(ctx context.Context, client kubernetes.Interface, host string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	type result struct{ err error }
	done := make(chan result, 1)
	go func() {
		_, err := client.Discovery().ServerVersion()
		done <- result{err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return fmt.Errorf("cannot reach the apiserver at %s: %s", host, safetext.OneLine(r.err))
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cannot reach the apiserver at %s: no answer in 10s", host)
	}
}
