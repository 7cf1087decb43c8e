package routing

import (
	"unicode/utf8"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/routing/classify"
)

// A session's role (node.Session.Role, from its token) decides what of a
// text it may run, checked here on the node or router the client talks
// to, before a statement is routed anywhere: the nodes it reaches next
// trust this one (routed reads run in sessions of the node credential, and
// forwarded writes take nothing else).
//
// A read token runs what changes nothing: statements classify calls reads,
// transaction control (a transaction of reads), and the session settings
// SET, RESET and USE (classify admits only the allow-listed ones). It may
// not write, nor run the session statements that act on the node or on
// what a later statement does (CHECKPOINT, VACUUM, ANALYZE, PREPARE,
// secrets, profiling), nor COPY … TO or EXPORT DATABASE, which classify
// calls reads because they change no replicated state, though they write
// the server's files when --allow-external-access lets them.

// requireRole refuses a text holding a statement the session's role does
// not allow, with a node.PermissionError naming it.
func requireRole(s *node.Session, stmts []classify.Statement) error {
	role := s.Role()
	if role.Allows(tokens.Write) {
		return nil
	}
	for _, stmt := range stmts {
		if !role.Allows(tokens.Read) || !readOnly(stmt) {
			return &node.PermissionError{What: statementName(stmt.Text), Have: role, Need: tokens.Write}
		}
	}
	return nil
}

// readOnly reports whether a read token may run stmt.
func readOnly(stmt classify.Statement) bool {
	switch stmt.Class {
	case classify.Begin, classify.Commit, classify.Rollback:
		return true
	case classify.Read, classify.Session:
	default:
		return false
	}
	if stmt.Err() != nil {
		return false
	}
	sig := stmt.Significant()
	if stmt.Class == classify.Session {
		return len(sig) > 0 && (sig[0].Is("set") || sig[0].Is("reset") || sig[0].Is("use"))
	}
	k := explained(sig)
	return k >= len(sig) || !sig[k].Is("copy") && !sig[k].Is("export")
}

// explained returns the index in sig of the statement an EXPLAIN
// explains, past EXPLAIN, ANALYZE and an option list; 0 when sig is no
// EXPLAIN.
func explained(sig []sqltext.Token) int {
	if len(sig) == 0 || !sig[0].Is("explain") {
		return 0
	}
	k := 1
	switch {
	case k < len(sig) && (sig[k].Is("analyze") || sig[k].Is("analyse")):
		k++
	case k < len(sig) && sig[k].IsPunct('('):
		for depth := 0; k < len(sig); k++ {
			if sig[k].IsPunct('(') {
				depth++
			} else if sig[k].IsPunct(')') {
				if depth--; depth == 0 {
					return k + 1
				}
			}
		}
	}
	return k
}

// statementName is a statement as a refusal quotes it: its text, cut to
// 120 bytes.
func statementName(sql string) string {
	if n := 120; len(sql) > n {
		for n > 0 && !utf8.RuneStart(sql[n]) {
			n--
		}
		sql = sql[:n] + "…"
	}
	return `"` + sql + `"`
}
