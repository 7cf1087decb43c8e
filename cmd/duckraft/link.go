package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/routing/classify"
)

// link is the CLI's connection to a cluster given as several servers
// (--server a,b,c): it connects to the first that answers and moves on to
// the next when its node dies (connection refused or reset), or reconnects
// when the node no longer knows the session (a restart: "Invalid connection
// id"). The session's settings the CLI ran (SET, RESET, USE) are run again
// on the new session. A read in flight when the node failed is run again
// on the next; a write is not, since it may have been applied: the user is
// told so.
type link struct {
	servers []endpoint
	opts    client.Options
	stderr  io.Writer
	cur     int // index of the server conn is on
	conn    *client.Conn
	// settings are the setting statements that succeeded, replayed on a
	// new session; inTxn is set while an explicit transaction is open,
	// which a failover loses.
	settings []string
	inTxn    bool
}

// connectTimeout bounds one try of one server.
const connectTimeout = 5 * time.Second

// errOutcomeUnknown is reported for a write whose node failed before it
// answered.
var errOutcomeUnknown = errors.New("the connection failed before the server answered, so the statement may or may not have been applied; " +
	"it was not run again. Check, then run it again if needed")

// dial connects to the first server that answers, starting at index from.
func (l *link) dial(ctx context.Context, from int) error {
	var errs []error
	for i := range l.servers {
		k := (from + i) % len(l.servers)
		cctx, cancel := context.WithTimeout(ctx, connectTimeout)
		opts := l.opts
		opts.TLS = l.servers[k].tls
		c, err := client.Connect(cctx, l.servers[k].server, opts)
		cancel()
		err = transportMismatch(l.servers[k], err)
		if err == nil {
			l.cur, l.conn = k, c
			return nil
		}
		if _, ok := errors.AsType[*client.ServerError](err); ok && len(l.servers) == 1 {
			return err
		}
		errs = append(errs, fmt.Errorf("%s: %w", l.servers[k].name, err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("no server answered: %w", errors.Join(errs...))
}

// close ends the session.
func (l *link) close() {
	if l.conn != nil {
		l.conn.Close()
	}
}

// nodeGone reports whether err means the session's node is gone or has
// forgotten the session, as opposed to the statement's own error or a
// cancellation.
func nodeGone(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if se, ok := errors.AsType[*client.ServerError](err); ok {
		return errors.Is(err, outcome.ErrUnknownSession) || errors.Is(err, outcome.ErrSessionExpired) ||
			se.Message == "Invalid connection id"
	}
	return true
}

// neverRan reports whether err says the statement never ran: the node
// refused the connection, or the session was unknown there.
func neverRan(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	se, ok := errors.AsType[*client.ServerError](err)
	return ok && (errors.Is(err, outcome.ErrUnknownSession) || errors.Is(err, outcome.ErrSessionExpired) || se.Message == "Invalid connection id")
}

// failover replaces a session whose node failed: the next server that
// answers (the same one first after a restart), with the settings
// replayed.
func (l *link) failover(ctx context.Context, cause error) error {
	// A node that forgot the session restarted: try it first. One that
	// refused or dropped the connection is gone: try the next.
	old, from := l.servers[l.cur].name, l.cur
	if _, restarted := errors.AsType[*client.ServerError](cause); !restarted {
		from = (l.cur + 1) % len(l.servers)
	}
	l.conn.Close()
	l.conn = nil
	if err := l.dial(ctx, from); err != nil {
		return fmt.Errorf("%s failed (%v), and no server could take over: %w", old, cause, err)
	}
	fmt.Fprintf(l.stderr, "duckraft: %s failed (%v); reconnected to %s\n", old, shortError(cause), l.servers[l.cur].name)
	if l.inTxn {
		l.inTxn = false
		fmt.Fprintln(l.stderr, "duckraft: the open transaction was lost with its session")
	}
	for _, s := range l.settings {
		if _, err := l.conn.Exec(ctx, s); err != nil {
			fmt.Fprintf(l.stderr, "duckraft: could not apply %q again: %v\n", s, err)
		}
	}
	return nil
}

// shortError is err's text without the request details Go adds.
func shortError(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 && len(s)-i < 80 {
		return s[i+2:]
	}
	return s
}

// query runs sql, one statement, on the current session, failing over
// once when its node is gone: a read or a session setting runs again on
// the new session, anything else is reported as of unknown outcome. It
// returns the statement's class as DuckDB's parser gives it
// (routing/classify), or 0 when it cannot tell.
func (l *link) query(ctx context.Context, sql string) (*client.Rows, classify.Class, error) {
	class, text := statementClass(sql)
	if l.conn == nil {
		if err := l.dial(ctx, l.cur); err != nil {
			return nil, class, err
		}
	}
	rows, err := l.conn.Query(ctx, sql)
	if !nodeGone(err) || len(l.servers) == 1 && !neverRan(err) {
		if err == nil {
			l.track(class, text)
		}
		return rows, class, err
	}
	if ferr := l.failover(ctx, err); ferr != nil {
		return nil, class, ferr
	}
	if !neverRan(err) && class != classify.Read && class != classify.Session {
		return nil, class, errOutcomeUnknown
	}
	rows, err = l.conn.Query(ctx, sql)
	if err == nil {
		l.track(class, text)
	}
	return rows, class, err
}

// statementClass classifies sql, one statement, with DuckDB's parser
// (routing/classify; a nextval() makes a write), and returns its text as
// classify reads it. A text that does not classify as exactly one
// statement has class 0: neither a read nor a setting, so never run
// again after a failure of unknown outcome.
func statementClass(sql string) (classify.Class, string) {
	stmts, err := classify.Statements(sql)
	if err != nil || len(stmts) != 1 {
		return 0, sql
	}
	return stmts[0].Class, stmts[0].Text
}

// track remembers what a statement that succeeded changed of the session:
// its settings, and whether a transaction is open.
func (l *link) track(class classify.Class, text string) {
	switch class {
	case classify.Session:
		if !isSetting(text) {
			return
		}
		l.settings = slices.DeleteFunc(l.settings, func(old string) bool { return old == text })
		l.settings = append(l.settings, text)
	case classify.Begin:
		l.inTxn = true
	case classify.Commit, classify.Rollback:
		l.inTxn = false
	}
}

// isSetting reports whether a session statement changes a setting (SET,
// RESET, USE) rather than doing something once (CALL checkpoint()).
func isSetting(sql string) bool {
	f := strings.Fields(strings.ToLower(sql))
	return len(f) > 0 && (f[0] == "set" || f[0] == "reset" || f[0] == "use")
}
