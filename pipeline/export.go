package pipeline

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/readyspan/readyspan/exporters/otlp"
	"github.com/readyspan/readyspan/node"
	"github.com/readyspan/readyspan/phases"
	"github.com/readyspan/readyspan/rollout"
)

// exportWait bounds how long ExportOTLP waits for the backend to take a batch.
const exportWait = time.Minute

// ExportOTLP sends the traces a replay rebuilt over OTLP once, and waits for the backend to
// take them, for at most a minute. It returns how many were exported; any dropped is an error.
func ExportOTLP(ctx context.Context, cfg otlp.Config, pods []*phases.Trace, rollouts []*rollout.Trace, nodes []*node.Trace) (int, error) {
	// The queue holds every trace of the batch until the backend takes it or the wait ends.
	cfg.QueueTraces, cfg.QueueBytes = len(pods)+len(rollouts)+len(nodes)+1, math.MaxInt64
	st := &batchStats{}
	exp, err := otlp.New(ctx, cfg, st, nil)
	if err != nil {
		return 0, err
	}
	exp.Start(ctx)
	for _, t := range pods {
		exp.Export(t)
	}
	for _, t := range rollouts {
		exp.ExportRollout(t)
	}
	for _, t := range nodes {
		exp.ExportNode(t)
	}
	sctx, cancel := context.WithTimeout(ctx, exportWait)
	defer cancel()
	if err := exp.Shutdown(sctx); err != nil {
		return st.exported, fmt.Errorf("export: %w", err)
	}
	if st.dropped > 0 {
		return st.exported, fmt.Errorf("exported %d traces, %d dropped (is the OTLP endpoint up?)", st.exported, st.dropped)
	}
	return st.exported, nil
}

// batchStats counts what ExportOTLP's exporter did with the batch.
type batchStats struct {
	mu                sync.Mutex
	exported, dropped int
}

func (s *batchStats) TraceExported()      { s.mu.Lock(); s.exported++; s.mu.Unlock() }
func (s *batchStats) TraceDropped(string) { s.mu.Lock(); s.dropped++; s.mu.Unlock() }
func (s *batchStats) ExportError()        {}
