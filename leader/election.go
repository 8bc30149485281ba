package leader

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Lease timings: client-go's usual ones. A leader that dies without releasing is replaced
// within LeaseDuration; one that stops releases the Lease and is replaced within RetryPeriod.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// ElectionConfig wires Run.
type ElectionConfig struct {
	Leases    coordinationv1client.LeasesGetter
	Namespace string
	Name      string // the Lease
	Identity  string // this replica, unique among them (its Pod name)
	// Settle is the correlator's settle time: a leader exports a Ready Pod that long after it
	// turned Ready, so one that died may not have exported what turned Ready in the Settle
	// before its last renewal.
	Settle time.Duration
	// OnStartedLeading is called when this replica wins the Lease, with up to when the previous
	// leader exported what was Ready (zero if there was none) and whether it released the
	// Lease: Gate.TakeOver.
	OnStartedLeading func(prevAlive time.Time, released bool)
	// OnStoppedLeading is called when this replica loses the Lease or stops: Gate.StepDown.
	OnStoppedLeading func()
	// Timings; zero is the default. Tests shorten them.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	Log                                       *slog.Logger
}

// Run campaigns for the Lease until ctx ends, and releases it then if it holds it. Run the
// stopping leader's drain, flush and Gate.Handover before ending ctx, so that the next
// leader's owed window starts after the last trace this one sent.
func Run(ctx context.Context, cfg ElectionConfig) error {
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = DefaultLeaseDuration
	}
	if cfg.RenewDeadline <= 0 {
		cfg.RenewDeadline = DefaultRenewDeadline
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = DefaultRetryPeriod
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lease := cfg.Namespace + "/" + cfg.Name
	lock := &observingLock{Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     cfg.Leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			ReleaseOnCancel: true,
			LeaseDuration:   cfg.LeaseDuration,
			RenewDeadline:   cfg.RenewDeadline,
			RetryPeriod:     cfg.RetryPeriod,
			Name:            cfg.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) {
					log.Info("Became leader; exporting", "lease", lease, "identity", cfg.Identity)
					cfg.OnStartedLeading(lock.previousAlive(cfg.Settle))
				},
				OnStoppedLeading: func() {
					lock.stoppedLeading()
					cfg.OnStoppedLeading()
					log.Info("Stopped leading", "lease", lease, "identity", cfg.Identity)
				},
			},
		})
		if err != nil {
			return fmt.Errorf("set up leader election on lease %s: %w", lease, err)
		}
		le.Run(ctx) // returns when leadership is lost: campaign again
	}
	return nil
}

// observingLock wraps the leader-election lock to remember the last record held by another
// process: its renew time is when the previous leader was last known alive. Another process
// may carry this one's identity: a container restarted in the same Pod (after a SIGKILL or an
// OOM kill) finds the Lease still held under its Pod name, and client-go lets it take the Lease
// at once; what the Lease says then is its dead predecessor's, not its own. So until this
// process has written the Lease itself, every record is a predecessor's. A graceful stop
// exports what is Ready, flushes, then releases the Lease (an empty holder) with a final renew
// time: everything Ready before it was exported. A leader that died without releasing may
// still have had traces waiting their settle time: those count as not exported.
type observingLock struct {
	resourcelock.Interface
	mu   sync.Mutex
	last resourcelock.LeaderElectionRecord
	own  bool // this process wrote the Lease since it last stopped leading: records under its identity are its own
}

func (l *observingLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	rec, raw, err := l.Interface.Get(ctx)
	if err == nil && rec != nil {
		l.mu.Lock()
		if rec.HolderIdentity != l.Identity() || !l.own {
			l.last = *rec
		}
		l.mu.Unlock()
	}
	return rec, raw, err
}

func (l *observingLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, rec)
	l.wrote(err)
	return err
}

func (l *observingLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, rec)
	l.wrote(err)
	return err
}

func (l *observingLock) wrote(err error) {
	if err == nil {
		l.mu.Lock()
		l.own = true
		l.mu.Unlock()
	}
}

// stoppedLeading makes what this process left on the Lease a predecessor's record to its next
// campaign: it exported nothing while not leading.
func (l *observingLock) stoppedLeading() {
	l.mu.Lock()
	l.own = false
	l.mu.Unlock()
}

// previousAlive returns the time up to which the previous leader exported what was Ready: its
// release, or its last renewal less the settle time; and whether it released the Lease (then
// its handover, written just before, is current).
func (l *observingLock) previousAlive(settle time.Duration) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.last.RenewTime.Time
	if t.IsZero() || l.last.HolderIdentity == "" {
		return t, !t.IsZero()
	}
	return t.Add(-settle), false
}
