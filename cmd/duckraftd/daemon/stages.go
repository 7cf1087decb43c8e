package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/duckraft/duckraft/wal"
)

// DefaultStageTimeout is Config.StageTimeout when it is zero.
const DefaultStageTimeout = 10 * time.Minute

// startSweeper drops the staged rows of transactions whose node went away
// before COMMIT or ROLLBACK (routing/stagesend.go): a node unstages what its
// own sessions staged, but a node that crashed cannot. The leader sweeps,
// so that the stages it reads are all that is committed.
func (d *Daemon) startSweeper() {
	timeout := d.cfg.StageTimeout
	if timeout == 0 {
		timeout = DefaultStageTimeout
	}
	if timeout < 0 {
		return
	}
	d.stages.start(min(timeout/4, time.Minute), d.store.IsLeader, func(ctx context.Context) {
		if err := d.sweepStages(ctx, timeout); err != nil {
			d.log.Warn("dropping idle staged rows failed", "err", err)
		}
	})
}

// sweepStages proposes an Unstage for each stage idle for timeout. The
// entry carries the idle bound, so a stage written since it was listed is
// kept on every node.
func (d *Daemon) sweepStages(ctx context.Context, timeout time.Duration) error {
	now := time.Now()
	if d.cfg.Now != nil {
		now = d.cfg.Now()
	}
	before := now.Add(-timeout).UnixMicro()
	ids, err := d.store.IdleStages(ctx, before)
	if err != nil {
		return err
	}
	for _, id := range ids {
		d.log.Info("dropping the staged rows of a transaction idle too long", "stage", fmt.Sprintf("%x", id), "idle_for", timeout)
		if _, err := d.store.Execute(ctx, wal.Command{Timestamp: now.UnixMicro(), Entry: wal.Unstage{ID: id, IdleBefore: before}}); err != nil {
			return err
		}
	}
	return nil
}
