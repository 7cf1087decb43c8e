package replication

import (
	"strings"

	"github.com/duckraft/duckraft/node/sqltext"
	"github.com/duckraft/duckraft/wal"
)

// Consecutive single-row INSERTs into one table are the common write, and
// DuckDB parses, plans and runs each statement for ~150 µs on a small
// machine, far more than the row itself costs. The FSM therefore applies a
// run of plain INSERT … VALUES commands with the same target as one
// multi-row INSERT (8 rows: ~320 µs instead of ~1.9 ms, measured), and
// hands each command its own row count.
//
// The merged statement must leave exactly the state the commands would
// leave one by one, on every node. It does when each VALUES list holds only
// literals: nothing in a row reads the table or depends on an earlier row,
// every node makes the same merge decisions from the same batch, and a
// merged statement that fails (a constraint, a bad cast) is rolled back and
// its commands re-applied one by one, so errors belong to the command that
// caused them.

// maxMergedRows bounds the rows of one merged INSERT so that its VALUES
// list stays within one DuckDB vector (2048 rows), which DuckDB evaluates in
// row order: column defaults such as nextval('seq') then number rows
// exactly as separate statements would.
const maxMergedRows = 1024

// plainInsert is an INSERT INTO name [(columns)] VALUES (…), … statement
// whose rows hold only literals.
type plainInsert struct {
	target string // normalized text up to and including VALUES
	values string // the rows, as written
	rows   int64
}

// parsePlainInsert recognizes a statement that may be merged with others
// of the same target. It is conservative: anything it does not fully
// understand is not merged.
func parsePlainInsert(st sqltext.Statement) (plainInsert, bool) {
	sig, k, ok := insertValuesHead(st)
	if !ok {
		return plainInsert{}, false
	}
	target := normalize(sig[:k+1])
	k++
	start := k
	var rows int64
	for {
		end, ok := literalRow(sig, k)
		if !ok {
			return plainInsert{}, false
		}
		rows++
		if end == len(sig) {
			break
		}
		if !sig[end].IsPunct(',') {
			return plainInsert{}, false
		}
		k = end + 1
	}
	last := sig[len(sig)-1]
	return plainInsert{
		target: target,
		values: st.Text[sig[start].Pos : last.Pos+len(last.Text)],
		rows:   rows,
	}, true
}

// insertValuesHead reads the head of INSERT INTO name [(columns)] VALUES
// in st: its significant tokens (a statement with a comment is refused,
// a final semicolon dropped) and the index of VALUES among them.
func insertValuesHead(st sqltext.Statement) ([]sqltext.Token, int, bool) {
	if st.Err() != nil {
		return nil, 0, false
	}
	var sig []sqltext.Token
	for _, t := range st.Tokens() {
		switch t.Kind {
		case sqltext.TokComment:
			return nil, 0, false
		case sqltext.TokSpace:
		default:
			sig = append(sig, t)
		}
	}
	if n := len(sig); n > 0 && sig[n-1].IsPunct(';') {
		sig = sig[:n-1]
	}
	if len(sig) < 5 || !sig[0].Is("insert") || !sig[1].Is("into") {
		return nil, 0, false
	}
	k, ok := qualifiedName(sig, 2)
	if !ok {
		return nil, 0, false
	}
	if k < len(sig) && sig[k].IsPunct('(') {
		if k, ok = columnList(sig, k); !ok {
			return nil, 0, false
		}
	}
	if k >= len(sig) || !sig[k].Is("values") {
		return nil, 0, false
	}
	return sig, k, true
}

// qualifiedName reads name[.name[.name]] at k and returns the position
// after it.
func qualifiedName(sig []sqltext.Token, k int) (int, bool) {
	for part := 0; part < 3; part++ {
		if k >= len(sig) || !isName(sig[k]) {
			return 0, false
		}
		k++
		if k >= len(sig) || !sig[k].IsPunct('.') {
			return k, true
		}
		k++
	}
	return 0, false
}

// columnList reads (name, …) at k and returns the position after it.
func columnList(sig []sqltext.Token, k int) (int, bool) {
	k++
	for {
		if k+1 >= len(sig) || !isName(sig[k]) {
			return 0, false
		}
		switch {
		case sig[k+1].IsPunct(','):
			k += 2
		case sig[k+1].IsPunct(')'):
			return k + 2, true
		default:
			return 0, false
		}
	}
}

func isName(t sqltext.Token) bool {
	if t.Kind == sqltext.TokQuotedIdent {
		return true
	}
	if t.Kind != sqltext.TokIdent {
		return false
	}
	for _, w := range []string{"values", "select", "default", "by", "or", "on", "returning", "from", "with"} {
		if t.Is(w) {
			return false
		}
	}
	return true
}

// literalRow reads one parenthesized row of literals at k and returns the
// position after it. Literals are numbers, strings, NULL, TRUE, FALSE,
// typed strings (DATE '…'), casts (::TYPE), operators and the brackets of
// lists, structs and maps; a function call, column reference, subquery or
// parameter makes the row not a literal one.
func literalRow(sig []sqltext.Token, k int) (int, bool) {
	if k >= len(sig) || !sig[k].IsPunct('(') {
		return 0, false
	}
	depth := 0
	for ; k < len(sig); k++ {
		t := sig[k]
		switch t.Kind {
		case sqltext.TokNumber, sqltext.TokString, sqltext.TokOp:
		case sqltext.TokPunct:
			switch t.Text[0] {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth--
				if depth == 0 {
					return k + 1, true
				}
			case ';', '.':
				return 0, false
			}
		case sqltext.TokIdent:
			switch {
			case t.Is("null"), t.Is("true"), t.Is("false"):
			case k > 0 && sig[k-1].Kind == sqltext.TokOp && sig[k-1].Text == "::":
			case k+1 < len(sig) && sig[k+1].Kind == sqltext.TokString:
			default:
				return 0, false
			}
		default:
			return 0, false
		}
	}
	return 0, false
}

// normalize joins tokens with single spaces, bare words in lower case as
// DuckDB compares them.
func normalize(toks []sqltext.Token) string {
	var b strings.Builder
	for i, t := range toks {
		if i > 0 {
			b.WriteByte(' ')
		}
		if t.Kind == sqltext.TokIdent {
			b.WriteString(strings.ToLower(t.Text))
		} else {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// insertRun is a run of consecutive commands of a batch applied as one
// merged INSERT.
type insertRun struct {
	first, n int // positions in the batch's work
	sql      string
	rows     []int64 // per command
}

// maxMergedText bounds the text of a statement considered for merging. The
// gain is in small INSERTs, where DuckDB's per-statement cost dominates; a
// large one would only pay for lexing it twice.
const maxMergedText = 4 << 10

// mergeableInsert returns p's statement as a plainInsert if p may join a
// merged run: a small plain literal INSERT without parameters.
func mergeableInsert(p pending) (plainInsert, bool) {
	st, ok := p.cmd.Entry.(wal.Statement)
	if !ok || len(st.Params) > 0 || len(st.SQL) > maxMergedText {
		return plainInsert{}, false
	}
	text := p.statement(0, st.SQL)
	if firstKeyword(text) != "INSERT" || checkStatement(text) != nil {
		return plainInsert{}, false
	}
	return parsePlainInsert(text)
}

// parseInserts sets the insert of every command of work that may join a
// merged run, once per entry rather than once per apply attempt.
func parseInserts(work []pending) {
	for i := range work {
		if in, ok := mergeableInsert(work[i]); ok {
			work[i].insert = &in
		}
	}
}

// nextRun returns the run of mergeable commands starting at work[k], or
// ok=false if fewer than two commands would join it. skip reports commands
// that must be applied alone (a replayed key, a known failure). It reads
// the inserts parseInserts found.
func nextRun(work []pending, k int, skip func(int) bool) (insertRun, bool) {
	if skip(k) || work[k].insert == nil {
		return insertRun{}, false
	}
	first := work[k].insert
	run := insertRun{first: k, rows: []int64{first.rows}}
	var b strings.Builder
	b.WriteString(first.target)
	b.WriteByte(' ')
	b.WriteString(first.values)
	total := first.rows
	keys := map[string]bool{}
	if key := work[k].cmd.Key; len(key) > 0 {
		keys[string(key)] = true
	}
	for j := k + 1; j < len(work); j++ {
		if skip(j) {
			break
		}
		if key := work[j].cmd.Key; len(key) > 0 {
			if keys[string(key)] {
				break
			}
			keys[string(key)] = true
		}
		next := work[j].insert
		if next == nil || next.target != first.target || total+next.rows > maxMergedRows {
			break
		}
		b.WriteString(", ")
		b.WriteString(next.values)
		total += next.rows
		run.rows = append(run.rows, next.rows)
	}
	run.n = len(run.rows)
	if run.n < 2 {
		return insertRun{}, false
	}
	run.sql = b.String()
	return run, true
}
