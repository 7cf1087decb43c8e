package routing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/node/wire"
)

// ErrStatementTimeout is what a read that ran past its statement timeout
// fails with (errors.Is); the error itself is a *TimeoutError. It is
// outcome's sentinel, so a Quack answer carries the code
// statement_timeout, and a router passes a data node's on without
// retrying the read elsewhere.
var ErrStatementTimeout = outcome.ErrStatementTimeout

// TimeoutError is a read interrupted because it ran longer than its
// session's statement timeout.
type TimeoutError struct{ Limit time.Duration }

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("duckraft: statement timeout: the read ran longer than %v and was interrupted; "+
		"SET duckraft_statement_timeout = '10min' changes this session's limit ('0' lifts it), "+
		"duckraftd --statement-timeout every session's default", e.Limit)
}

// Is makes errors.Is(err, ErrStatementTimeout) hold.
func (e *TimeoutError) Is(target error) bool { return target == ErrStatementTimeout }

// maxStatementTimeout bounds the session setting; longer is a typo more
// likely than a wish, and '0' lifts the limit.
const maxStatementTimeout = 7 * 24 * time.Hour

// timeoutSetting recognises SET duckraft_statement_timeout = '<duration>'
// (Go's syntax: '500ms', '30s', '10m', '1h'; a bare number of seconds;
// '0' for none), which the router keeps itself.
func timeoutSetting(stmt sqltext.Statement) (time.Duration, bool, error) {
	v, ok := setStatement(stmt, "duckraft_statement_timeout")
	if !ok {
		return 0, false, nil
	}
	text := v.Text
	switch {
	case v.Kind == sqltext.TokString && strings.Count(text, "'") == 2:
		text = text[1 : len(text)-1]
	case v.Kind == sqltext.TokNumber:
	default:
		return 0, true, errBadTimeout(v.Text)
	}
	d, err := ParseStatementTimeout(text)
	if err != nil {
		return 0, true, err
	}
	return d, true, nil
}

// ParseStatementTimeout reads a statement timeout: a Go duration ('30s',
// '1m30s', '500ms'), or a whole number of seconds; 0 is none.
func ParseStatementTimeout(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if err != nil {
		var secs uint64
		if _, serr := fmt.Sscanf(s, "%d", &secs); serr != nil || fmt.Sprint(secs) != s || secs > uint64(maxStatementTimeout/time.Second) {
			return 0, errBadTimeout(s)
		}
		d = time.Duration(secs) * time.Second
	}
	if d < 0 || d > maxStatementTimeout {
		return 0, errBadTimeout(s)
	}
	return d, nil
}

func errBadTimeout(v string) error {
	return fmt.Errorf("duckraft: duckraft_statement_timeout must be a duration such as '30s', '5m' or '500ms' "+
		"(at most %v; '0' for none), not %s", maxStatementTimeout, v)
}

// statementTimeout is the session's limit on a read: its own setting, or
// the node's default.
func (st *sessionState) statementTimeout(def time.Duration) time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.timeout != nil {
		return *st.timeout
	}
	return def
}

// bounded runs read under a deadline d from now, if d > 0: the read's
// DuckDB query (here, on the node it was routed to, every share of a split
// scan) is interrupted when the deadline passes, whether it still computes
// its first rows or streams them. Its error then is a *TimeoutError.
func bounded(ctx context.Context, d time.Duration, read func(context.Context) (node.Rows, error)) (node.Rows, error) {
	if d <= 0 {
		return read(ctx)
	}
	tctx, cancel := context.WithTimeoutCause(ctx, d, &TimeoutError{Limit: d})
	rows, err := read(tctx)
	if err != nil {
		err = timeoutOr(tctx, err)
		cancel()
		return nil, err
	}
	t := &timedRows{Rows: rows, ctx: tctx, cancel: cancel}
	if er, ok := rows.(node.EncodedRows); ok {
		return timedEncodedRows{t, er}, nil
	}
	return t, nil
}

// timeoutOr returns the TimeoutError that ended ctx, if one did, else err.
func timeoutOr(ctx context.Context, err error) error {
	if te, ok := errors.AsType[*TimeoutError](context.Cause(ctx)); ok && err != nil {
		return te
	}
	return err
}

// timedRows are rows read under a statement timeout: an error once the
// deadline passed is the TimeoutError, and closing them releases the
// deadline, after the rows (so nothing they run sees a cancellation).
type timedRows struct {
	node.Rows
	ctx    context.Context
	cancel context.CancelFunc
}

func (r *timedRows) Next() (*wire.DataChunk, error) {
	c, err := r.Rows.Next()
	return c, timeoutOr(r.ctx, err)
}

func (r *timedRows) Close() {
	r.Rows.Close()
	r.cancel()
}

type timedEncodedRows struct {
	*timedRows
	er node.EncodedRows
}

func (r timedEncodedRows) NextEncoded(g wire.Generation) ([]byte, int, *wire.Buffer, error) {
	enc, n, buf, err := r.er.NextEncoded(g)
	return enc, n, buf, timeoutOr(r.ctx, err)
}
