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
	if _, err := conn.Exec(ctx, "BEGIN TRANSACTION"); err != nil {
		return StateHash{}, err
	}
	defer conn.Exec(context.Background(), "ROLLBACK")

	var out StateHash
	idx, err := readApplied(conn)
	if err != nil {
		return StateHash{}, err
	}
	out.Index = idx
	h := sha256.New()
	schema, err := queryStrings(ctx, conn, fmt.Sprintf(`
		SELECT schema_name || '.' || table_name || ':' || sql FROM duckdb_tables()
		WHERE NOT temporary AND schema_name <> '%[1]s'
		UNION ALL SELECT schema_name || '.' || view_name || ':' || sql FROM duckdb_views()
		WHERE NOT internal AND NOT temporary AND schema_name <> '%[1]s'
		UNION ALL SELECT schema_name || '.' || sequence_name || ':' || sql FROM duckdb_sequences()
		WHERE NOT temporary AND schema_name <> '%[1]s'`, metaSchema))
	if err != nil {
		return StateHash{}, fmt.Errorf("state hash schema: %w", err)
	}
	sort.Strings(schema)
	for _, s := range schema {
		fmt.Fprintf(h, "%s\n", s)
	}
	tables, err := queryStrings(ctx, conn, fmt.Sprintf(`
		SELECT '"' || replace(schema_name, '"', '""') || '"."' || replace(table_name, '"', '""') || '"'
		FROM duckdb_tables() WHERE NOT temporary AND schema_name <> '%s'`, metaSchema))
	if err != nil {
		return StateHash{}, fmt.Errorf("state hash tables: %w", err)
	}
	sort.Strings(tables)
	for _, t := range tables {
		res, err := conn.Query(ctx, fmt.Sprintf(
			"SELECT count(*)::BIGINT, coalesce(sum(hash(r)::HUGEINT), 0)::VARCHAR FROM %s r", t))
		if err != nil {
			return StateHash{}, fmt.Errorf("state hash of %s: %w", t, err)
		}
		c, err := res.Next()
		if err != nil || c == nil || c.Rows != 1 {
			res.Close()
			return StateHash{}, fmt.Errorf("state hash of %s: %v", t, err)
		}
		n, _ := c.Columns[0].Value(0)
		sum, _ := c.Columns[1].Value(0)
		res.Close()
		rows, _ := n.(int64)
		out.Rows += rows
		fmt.Fprintf(h, "%s %d %v\n", t, rows, sum)
	}
	out.Hash = hex.EncodeToString(h.Sum(nil))
	return out, nil
}

func queryStrings(ctx context.Context, conn *engine.Conn, q string) ([]string, error) {
	res, err := conn.Query(ctx, q)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	var out []string
	for {
		c, err := res.Next()
		if err != nil {
			return nil, err
		}
		if c == nil {
			return out, nil
		}
		for i := 0; i < c.Rows; i++ {
			v, err := c.Columns[0].Value(i)
			if err != nil {
				return nil, err
			}
			s, _ := v.(string)
			out = append(out, strings.TrimSpace(s))
		}
	}
}
