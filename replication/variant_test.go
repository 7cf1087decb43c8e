package replication

import (
	"context"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/wal"
)

// variantRows are 3000 rows (two DuckDB vectors) of VARIANTs of every
// shape, alone, in a list and in a struct, with NULLs at each level.
const variantRows = `SELECT i::INTEGER AS id,
	CASE WHEN i % 7 = 0 THEN NULL WHEN i % 4 = 0 THEN i::VARIANT
		WHEN i % 4 = 1 THEN {'k': i, 's': repeat('x', (i % 30)::INTEGER), 'd': DATE '2024-02-29' + i::INTEGER}::VARIANT
		WHEN i % 4 = 2 THEN [i::DECIMAL(18,3), NULL]::VARIANT
		ELSE ('{"j": [' || i || ', "a string longer than twelve bytes", null, {}], "u": "' || uuid() || '"}')::JSON::VARIANT END AS v,
	CASE WHEN i % 11 = 0 THEN NULL ELSE [i::VARIANT, NULL, ('t' || i)::VARIANT] END AS l,
	CASE WHEN i % 13 = 0 THEN NULL ELSE {'v': (i * 1.5)::DOUBLE::VARIANT, 'n': i} END AS s
	FROM range(3000) r(i)`

// variantChunks are the rows of variantRows made on a database of their
// own, as a client holds them: encoded Q3 DataChunks, and the rows'
// digest there.
func variantChunks(t *testing.T) ([][]byte, string) {
	t.Helper()
	db := openDB(t, t.TempDir())
	defer db.Close()
	conn, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE TABLE src AS "+variantRows); err != nil {
		t.Fatal(err)
	}
	res, err := conn.Query(ctx, "FROM src ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	var chunks [][]byte
	for {
		c, err := res.Next()
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			break
		}
		enc, err := wire.AppendDataChunk(nil, c, wire.Q3)
		if err != nil {
			t.Fatal(err)
		}
		chunks = append(chunks, enc)
	}
	res.Close()
	return chunks, tableDigest(t, db, "src")
}

// tableDigest is the row count and the sum of the row hashes of table, as
// the state hash digests a table.
func tableDigest(t *testing.T, db *engine.DB, table string) string {
	t.Helper()
	conn, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	row, err := conn.QueryRow(context.Background(),
		"SELECT count(*) || ' ' || coalesce(sum(hash(r)::HUGEINT), 0) FROM "+table+" r")
	if err != nil {
		t.Fatal(err)
	}
	return row[0].(string)
}

const variantTable = "(id INTEGER, v VARIANT, l VARIANT[], s STRUCT(v VARIANT, n INTEGER))"

// TestVariantAppendReplicates appends VARIANT columns through Raft to a
// table of main (DuckDB's table appender) and to one of a nested schema
// (the query appender): every node holds the client's rows and the three
// state hashes are equal.
func TestVariantAppendReplicates(t *testing.T) {
	chunks, want := variantChunks(t)
	nodes := startCluster(t, 3, nil)
	execOnLeader(t, nodes, stmt("CREATE TABLE v"+variantTable))
	execOnLeader(t, nodes, stmt("CREATE SCHEMA a"))
	execOnLeader(t, nodes, stmt("CREATE SCHEMA a.b"))
	execOnLeader(t, nodes, stmt("CREATE TABLE a.b.v"+variantTable))
	var last uint64
	for _, c := range chunks {
		for _, a := range []wal.Append{{Schema: "main", Table: "v", Chunk: c}, {Parents: []string{"a"}, Schema: "b", Table: "v", Chunk: c}} {
			res := execOnLeader(t, nodes, wal.Command{Entry: a})
			if res.RowsChanged == 0 {
				t.Fatalf("append to %v.%s changed no rows", a.Path(), a.Table)
			}
			last = max(last, res.Index)
		}
	}
	waitApplied(t, nodes, last)

	ctx := context.Background()
	var hashes []StateHash
	for _, n := range nodes {
		for _, table := range []string{"v", "a.b.v"} {
			if got := tableDigest(t, n.db, table); got != want {
				t.Errorf("%s: %s has rows %s, the client's %s", n.id, table, got, want)
			}
		}
		h, err := n.store.StateHash(ctx)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	for i, h := range hashes[1:] {
		if h.Index != hashes[0].Index || h.Hash != hashes[0].Hash || h.Rows != hashes[0].Rows {
			t.Errorf("%s: state hash %+v, %s: %+v", nodes[i+1].id, h, nodes[0].id, hashes[0])
		}
	}
}

// TestSnapshotRestoresVariant: a snapshot carries VARIANT columns (its
// frames are Q3 chunks, restored through Conn.Append) and the restored
// copy hashes as the original.
func TestSnapshotRestoresVariant(t *testing.T) {
	chunks, want := variantChunks(t)
	f := openFSM(t, openDB(t, t.TempDir()))
	defer f.close()
	cmds := []wal.Command{stmt("CREATE TABLE v" + variantTable), stmt("CREATE SCHEMA a"), stmt("CREATE SCHEMA a.b"), stmt("CREATE TABLE a.b.v" + variantTable)}
	for _, c := range chunks {
		cmds = append(cmds, wal.Command{Entry: wal.Append{Schema: "main", Table: "v", Chunk: c}},
			wal.Command{Entry: wal.Append{Parents: []string{"a"}, Schema: "b", Table: "v", Chunk: c}})
	}
	for i, c := range cmds {
		r := f.ApplyBatch([]*raft.Log{logEntry(t, uint64(i+1), c)})[0].(*entryResult)
		if err := r.results[0].err; err != nil {
			t.Fatalf("entry %d: %v", i+1, err)
		}
	}
	g := restoredCopy(t, f)
	defer g.close()
	if got, want := fsmHash(t, g), fsmHash(t, f); got != want {
		t.Fatalf("restored hash %+v, want %+v", got, want)
	}
	for _, table := range []string{"v", "a.b.v"} {
		if got := tableDigest(t, g.db, table); got != want {
			t.Errorf("restored %s has rows %s, the client's %s", table, got, want)
		}
	}
}
