// Package sqltext reads SQL text the way duckraft needs to before DuckDB
// does: a lexer that splits a text into tokens and statements, and the text
// rules by which the leader makes a client's write deterministic (the clock
// becomes the leader's timestamp, volatile INSERTs are materialized, what no
// replica can repeat is refused) or the applier decides how to run an entry.
//
// The leader's decision on a write is routing/analyze's Decide, not this
// package's: it runs the text rules here (Deterministic) first and DuckDB's
// binder on the result after. This package holds what needs only the text,
// and the one list of function classes (ClassifyFunction) both judge by.
//
// The lexer's output is part of the replicated state machine: every node's
// applier reads each log entry through it, so a text must lex the same way
// on every build that may apply the log. Golden files (testdata) pin its
// output and the rules' answers over a corpus. The package depends on the
// standard library only, so any package may import it; DESIGN.md says what
// it guarantees.
package sqltext
