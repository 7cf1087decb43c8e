package routing

import (
	"context"
	"fmt"
	"slices"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/routing/classify"
)

// A client's session settings (SET TimeZone, SET search_path, USE …) live
// in its session on the node it connected to. Its reads may run on other
// nodes, in sessions this node opens there, so the settings follow them:
// the session remembers every statement that changed one, and a remote
// session replays them before its next read whenever they changed since it
// last did. Only the allow-listed session settings (classify/settings.go)
// can run at all; SET GLOBAL and setting PRAGMAs are refused.

// maxSettings bounds the remembered setting statements of one session;
// a repeated statement replaces its earlier copy, so only a client that
// issues thousands of different settings reaches it.
const maxSettings = 256

// followingSettings returns the statements of stmts that remote sessions
// must replay, or nil.
func followingSettings(stmts []classify.Statement) []string {
	var out []string
	for _, st := range stmts {
		if st.Err() != nil {
			continue
		}
		verb, _ := st.Verb()
		switch verb {
		case "set", "reset":
			if set, _ := st.Setting(); set.Scope == "global" {
				continue
			}
		case "use":
		default:
			continue
		}
		out = append(out, st.Text)
	}
	return out
}

// rememberSettings records setting statements that ran in the session.
func (st *sessionState) rememberSettings(stmts []string) {
	if len(stmts) == 0 {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, s := range stmts {
		st.settings = slices.DeleteFunc(st.settings, func(old string) bool { return old == s })
		st.settings = append(st.settings, s)
	}
	if len(st.settings) > maxSettings {
		st.settings = st.settings[len(st.settings)-maxSettings:]
	}
	st.settingsVersion++
}

// syncSettings replays the session's settings on rc if they changed since
// it last did.
func (st *sessionState) syncSettings(ctx context.Context, rc *remoteConn) error {
	st.mu.Lock()
	version, settings := st.settingsVersion, slices.Clone(st.settings)
	st.mu.Unlock()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.settingsVersion == version {
		return nil
	}
	for _, s := range settings {
		if err := rc.sess.Exec(ctx, s); err != nil {
			return fmt.Errorf("apply session setting %q on another node: %w", s, err)
		}
	}
	rc.settingsVersion = version
	return nil
}

// routerSetting handles the settings the router keeps itself (SET
// duckraft_consistency, duckraft_write_key, duckraft_split_scan,
// duckraft_statement_timeout); ok is false for any other statement.
func (e *Executor) routerSetting(st *sessionState, stmt sqltext.Statement) (node.Rows, bool, error) {
	// set changes the session's state as the statement says, and the
	// other nodes learn of it before the statement is answered.
	set := func(err error, change func()) (node.Rows, bool, error) {
		if err != nil {
			return nil, true, err
		}
		st.mu.Lock()
		change()
		st.mu.Unlock()
		e.sessionChanged(st)
		return successRows(), true, nil
	}
	if level, ok, err := consistencySetting(stmt); ok {
		return set(err, func() { st.consistency = level })
	}
	if key, ok, err := writeKeySetting(stmt); ok {
		return set(err, func() { st.writeKey = key })
	}
	if d, ok, err := timeoutSetting(stmt); ok {
		return set(err, func() { st.timeout = &d })
	}
	if n, ok, err := splitSetting(stmt); ok {
		return set(err, func() { st.split = n })
	}
	return nil, false, nil
}
