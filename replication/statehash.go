package replication

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqlquote"
)

// StateHash is a digest of a node's database at an applied index: equal
// hashes at equal indexes mean equal schemas and equal rows.
type StateHash struct {
	Index uint64 `json:"applied_index"`
	Hash  string `json:"hash"`
	Rows  int64  `json:"rows"`
}

// StateHash digests the user-visible schema and every user table's rows,
// order-independently (a sum of row hashes, so duplicates count), all read in
// one transaction so they belong to one applied index.
func (s *Store) StateHash(ctx context.Context) (StateHash, error) {
	conn, err := s.cfg.DB.Connect()
	if err != nil {
		return StateHash{}, err
	}
	defer conn.Close()
	if err := s.fsm.pins.apply(conn); err != nil {
		return StateHash{}, fmt.Errorf("state hash: %w", err)
	}
	if _, err := conn.Exec(ctx, "BEGIN TRANSACTION"); err != nil {
		return StateHash{}, err
	}
	defer conn.Exec(context.Background(), "ROLLBACK")

	idx, err := readApplied(conn)
	if err != nil {
		return StateHash{}, err
	}
	schema, err := hashSchema(ctx, conn)
	if err != nil {
		return StateHash{}, err
	}
	return hashRows(ctx, conn, idx, schema)
}

// hashSchema reads the part of the state hash that describes the schema,
// in conn's transaction. Sequences are not transactional in DuckDB, so a
// hash exact at an index reads it while the FSM applies nothing (see
// fsm.pinBackup); the rows may be read later in the same transaction. An
// object is named by its schema's name, or for a nested schema (DuckDB
// 2.0) by the schema's quoted path, and DuckDB 2.0's triggers count: a
// catalog of neither hashes as it did before them.
func hashSchema(ctx context.Context, conn *engine.Conn) ([]string, error) {
	const schema = `CASE WHEN p.depth = 1 THEN o.schema_name ELSE p.qpath END || '.' || `
	lines, err := queryTrimmed(ctx, conn, schemaPaths+`
		SELECT `+schema+`o.table_name || ':' || o.sql FROM duckdb_tables()`+ofSchema+` WHERE NOT o.temporary
		UNION ALL SELECT `+schema+`o.view_name || ':' || o.sql FROM duckdb_views()`+ofSchema+`
			WHERE NOT o.internal AND NOT o.temporary
		UNION ALL SELECT `+schema+`o.sequence_name || ':' || o.sql FROM duckdb_sequences()`+ofSchema+` WHERE NOT o.temporary
		UNION ALL SELECT `+schema+`o.trigger_name || ':' || o.sql FROM duckdb_triggers()`+ofSchema+` WHERE NOT o.temporary`)
	if err != nil {
		return nil, fmt.Errorf("state hash schema: %w", err)
	}
	sort.Strings(lines)
	return lines, nil
}

// hashRows completes the state hash at index idx of the schema lines read
// by hashSchema with every user table's rows, read in conn's transaction.
func hashRows(ctx context.Context, conn *engine.Conn, idx uint64, schema []string) (StateHash, error) {
	out := StateHash{Index: idx}
	h := sha256.New()
	for _, s := range schema {
		fmt.Fprintf(h, "%s\n", s)
	}
	tables, err := queryTrimmed(ctx, conn, schemaPaths+`SELECT p.qpath || '.' || `+qi("o.table_name")+`
		FROM duckdb_tables()`+ofSchema+` WHERE NOT o.temporary`)
	if err != nil {
		return StateHash{}, fmt.Errorf("state hash tables: %w", err)
	}
	sort.Strings(tables)
	for _, t := range tables {
		row, err := conn.QueryRow(ctx, fmt.Sprintf(
			"SELECT count(*)::BIGINT, coalesce(sum(hash(r)::HUGEINT), 0)::VARCHAR FROM %s.%s r", sqlquote.Ident(conn.Catalog()), t))
		if err != nil {
			return StateHash{}, fmt.Errorf("state hash of %s: %w", t, err)
		}
		rows, _ := row[0].(int64)
		out.Rows += rows
		fmt.Fprintf(h, "%s %d %v\n", t, rows, row[1])
	}
	out.Hash = hex.EncodeToString(h.Sum(nil))
	return out, nil
}

// queryTrimmed returns the strings of q's first column with surrounding
// white space removed.
func queryTrimmed(ctx context.Context, conn *engine.Conn, q string) ([]string, error) {
	out, err := conn.QueryStrings(ctx, q)
	for i, s := range out {
		out[i] = strings.TrimSpace(s)
	}
	return out, err
}
