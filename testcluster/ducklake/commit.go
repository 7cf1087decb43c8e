package ducklake

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"
)

// RetryConfig is DuckLakeRetryConfig: ducklake_max_retry_count,
// ducklake_retry_wait_ms and ducklake_retry_backoff, with DuckLake's
// defaults.
type RetryConfig struct {
	MaxRetries int
	Wait       time.Duration
	Backoff    float64
}

// DefaultRetry is DuckLake's default: 10 retries, 100 ms apart, ×1.5.
var DefaultRetry = RetryConfig{MaxRetries: 10, Wait: 100 * time.Millisecond, Backoff: 1.5}

// Outcome is what a DuckLake client knows of one of its commits.
type Outcome int

const (
	// Committed: the client was told the commit succeeded.
	Committed Outcome = iota
	// Failed: the commit was refused and applied nothing (a statement's
	// error, a conflict, the retries exhausted, the connection lost
	// before COMMIT).
	Failed
	// Unknown: the answer to the statement that commits was lost, or it
	// was duckraft's unknown_outcome; the harness resolves it afterwards.
	Unknown
)

func (o Outcome) String() string {
	return [...]string{"committed", "failed", "unknown"}[o]
}

// attempt is one try of the commit loop: the snapshot it writes and what
// its batch allocated.
type attempt struct {
	// snap is the new snapshot: the newest one read, plus one.
	snap  snapshot
	stats map[int64]tableStats
	// What build allocated, for the caller's model of the lake.
	tableID, fileID, rowIDStart int64
	inlined                     string
}

// change is what a DuckLake transaction commits: its changes_made entry,
// the batch of its writes for a given snapshot, and DuckLake's conflict
// rules against the changes other transactions made since it started.
type change struct {
	schemaChange bool
	changes      func(a *attempt) string
	// build returns the writes of the batch for a (it may read the
	// catalog first, as CommitChanges does); it allocates ids from
	// a.snap.
	build     func(ctx context.Context, a *attempt) (string, error)
	conflicts func(others []changeEntry) error
}

// changeEntry is one entry of ducklake_snapshot_changes.changes_made.
type changeEntry struct{ Kind, Value string }

// parseChanges is SnapshotChangeInformation::ParseChangesMade's split.
func parseChanges(s string) []changeEntry {
	var out []changeEntry
	for _, part := range splitChanges(s) {
		kind, value, _ := strings.Cut(part, ":")
		out = append(out, changeEntry{kind, value})
	}
	return out
}

// splitChanges splits at the commas outside double quotes.
func splitChanges(s string) []string {
	var out []string
	inQuote, start := false, 0
	for i, r := range s {
		switch {
		case r == '"':
			inQuote = !inQuote
		case r == ',' && !inQuote:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// errConflict is DuckLake's TransactionException for a logical conflict
// ("Transaction conflict - attempting to …").
var errConflict = errors.New("Transaction conflict")

// conflictWith returns the conflict rule of
// DuckLakeTransactionState::CheckForConflicts for an action on table id:
// it conflicts with any of the kinds others made on the same table.
func conflictWith(action string, table int64, kinds ...string) func([]changeEntry) error {
	want := fmt.Sprint(table)
	return func(others []changeEntry) error {
		for _, o := range others {
			for _, k := range kinds {
				if o.Kind == k && o.Value == want {
					return fmt.Errorf("%w - attempting to %s with index \"%d\" - but another transaction has %s it", errConflict, action, table, k)
				}
			}
		}
		return nil
	}
}

// commitResult is how a commit ended.
type commitResult struct {
	Outcome Outcome
	// Attempt is the last attempt, the one that committed or whose
	// outcome is unknown.
	Attempt  *attempt
	Attempts int
	// Retried counts the retries the commit loop made after a
	// conflict error.
	Retried int
	// Unknown are the attempts whose outcome was unknown and which the
	// loop retried all the same (RetryOnError accepted their error): each
	// may have applied besides the last.
	Unknown []*attempt
	// Trace lists each attempt's snapshot and error.
	Trace []string
	Err   error
	// Lost reports that the connection failed: the client reconnects.
	Lost bool
}

// commit runs DuckLakeTransactionState::Commit, the client-side commit
// loop: the first attempt builds on the transaction's snapshot; a retry
// first reads the newest snapshot, the changes since the transaction's
// snapshot and the statistics (and fails at once on a logical conflict);
// each attempt sends its batch as one text, then COMMIT; an error is
// retried only if RetryOnError accepts it.
func (l *Lake) commit(ctx context.Context, ch *change, tag string) commitResult {
	s0, err := l.snapshot(ctx)
	if err != nil {
		return l.failed(ctx, err, 0, nil)
	}
	stats0, err := l.stats(ctx)
	if err != nil {
		return l.failed(ctx, err, 0, nil)
	}
	res := commitResult{}
	for i := 0; i <= l.retry.MaxRetries; i++ {
		res.Attempts = i + 1
		a := &attempt{}
		if i > 0 {
			snap, stats, others, err := l.snapshotStatsAndChanges(ctx, s0)
			if err != nil {
				return l.failedAfter(ctx, res, err, nil)
			}
			if err := ch.conflicts(others); err != nil {
				return l.failedAfter(ctx, res, err, nil)
			}
			a.snap, a.stats = snap, stats
		} else {
			a.snap, a.stats = *s0, stats0
		}
		a.snap.ID++
		if ch.schemaChange {
			a.snap.SchemaVersion++
		}
		body, err := ch.build(ctx, a)
		if err != nil {
			return l.failedAfter(ctx, res, err, nil)
		}
		batch := subst(insertSnapshotSQL+body+snapshotChangesSQL(ch.changes(a)), a.snap, tag)
		_, err = l.meta.query(ctx, batch)
		// In autocommit the batch itself commits; in a transaction,
		// COMMIT does.
		committing := l.meta.mode == Autocommit
		if err == nil {
			committing = true
			err = l.meta.commit(ctx)
		}
		if err == nil {
			res.Outcome, res.Attempt = Committed, a
			l.snap = nil
			return res
		}
		l.meta.rollback(ctx)
		res.Trace = append(res.Trace, fmt.Sprintf("%s on %s: snapshot %d: %s", time.Now().Format("15:04:05.000"), where(l.meta.b), a.snap.ID, errorKind(err.Error())))
		unknown := committing && (!answered(err) || unknownOutcome(err))
		if unknown {
			res.Unknown = append(res.Unknown, a)
		}
		if !answered(err) || !retryOnError(err) || i == l.retry.MaxRetries {
			if i == l.retry.MaxRetries && retryOnError(err) {
				err = fmt.Errorf("Failed to commit DuckLake transaction. Exceeded the maximum retry count of %d: %w", l.retry.MaxRetries, err)
			}
			return l.failedAfter(ctx, res, err, a)
		}
		res.Retried++
		wait := float64(l.retry.Wait) * (0.5 + rand.Float64()/2) * math.Pow(l.retry.Backoff, float64(i))
		select {
		case <-ctx.Done():
			return l.failedAfter(ctx, res, ctx.Err(), a)
		case <-time.After(time.Duration(wait)):
		}
	}
	return res
}

// failed ends a commit that applied nothing.
func (l *Lake) failed(ctx context.Context, err error, attempts int, a *attempt) commitResult {
	return l.failedAfter(ctx, commitResult{Attempts: attempts}, err, a)
}

// failedAfter ends a commit whose last attempt failed: Failed, unless an
// attempt's outcome is unknown.
func (l *Lake) failedAfter(ctx context.Context, res commitResult, err error, a *attempt) commitResult {
	l.meta.rollback(ctx)
	l.snap = nil
	res.Outcome, res.Err, res.Attempt = Failed, err, a
	if len(res.Unknown) > 0 {
		res.Outcome, res.Attempt = Unknown, res.Unknown[len(res.Unknown)-1]
	}
	res.Lost = !answered(err) && !errors.Is(err, errConflict) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
	return res
}

// snapshotStatsAndChanges reads what a retried commit builds on.
func (l *Lake) snapshotStatsAndChanges(ctx context.Context, s0 *snapshot) (snapshot, map[int64]tableStats, []changeEntry, error) {
	rows, err := l.meta.query(ctx, subst(snapshotAndStatsAndChangesSQL, *s0, ""))
	if err != nil {
		return snapshot{}, nil, nil, fmt.Errorf("Failed to commit DuckLake transaction - failed to get snapshot and snapshot changes for conflict resolution: %w", err)
	}
	if len(rows) == 0 {
		return snapshot{}, nil, nil, errors.New("no snapshot in the catalog")
	}
	first := rows[0]
	snap := snapshot{mustInt(first[0]), mustInt(first[1]), mustInt(first[2]), mustInt(first[3])}
	stats := parseStats(rows[1:], 5)
	return snap, stats, parseChanges(asString(first[4])), nil
}

// parseStats reads table statistics rows whose table_id is column off.
func parseStats(rows [][]any, off int) map[int64]tableStats {
	out := map[int64]tableStats{}
	for _, r := range rows {
		id, ok := asInt(r[off])
		if !ok {
			continue
		}
		if _, seen := out[id]; seen {
			continue
		}
		out[id] = tableStats{Records: mustInt(r[off+2]), NextRowID: mustInt(r[off+3]), Size: mustInt(r[off+4]), Initialized: true}
	}
	return out
}
