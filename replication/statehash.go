package replication

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/duckraft/duckraft/node/engine"
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
// fsm.pinBackup); the rows may be read later in the same transaction.
func hashSchema(ctx context.Context, conn *engine.Conn) ([]string, error) {
	schema, err := queryTrimmed(ctx, conn, fmt.Sprintf(`
		SELECT schema_name || '.' || table_name || ':' || sql FROM duckdb_tables()
		WHERE NOT temporary AND schema_name <> '%[1]s'
		UNION ALL SELECT schema_name || '.' || view_name || ':' || sql FROM duckdb_views()
		WHERE NOT internal AND NOT temporary AND schema_name <> '%[1]s'
		UNION ALL SELECT schema_name || '.' || sequence_name || ':' || sql FROM duckdb_sequences()
		WHERE NOT temporary AND schema_name <> '%[1]s'`, metaSchema))
	if err != nil {
		return nil, fmt.Errorf("state hash schema: %w", err)
	}
	sort.Strings(schema)
	return schema, nil
}

// hashRows completes the state hash at index idx of the schema lines read
// by hashSchema with every user table's rows, read in conn's transaction.
func hashRows(ctx context.Context, conn *engine.Conn, idx uint64, schema []string) (StateHash, error) {
	out := StateHash{Index: idx}
	h := sha256.New()
	for _, s := range schema {
		fmt.Fprintf(h, "%s\n", s)
	}
	tables, err := queryTrimmed(ctx, conn, fmt.Sprintf(`
		SELECT '"' || replace(schema_name, '"', '""') || '"."' || replace(table_name, '"', '""') || '"'
		FROM duckdb_tables() WHERE NOT temporary AND schema_name <> '%s'`, metaSchema))
	if err != nil {
		return StateHash{}, fmt.Errorf("state hash tables: %w", err)
	}
	sort.Strings(tables)
	for _, t := range tables {
		row, err := conn.QueryRow(ctx, fmt.Sprintf(
			"SELECT count(*)::BIGINT, coalesce(sum(hash(r)::HUGEINT), 0)::VARCHAR FROM %s r", t))
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
