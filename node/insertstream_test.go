package node_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node/wire"
)

// TestInsertStreamIsRecognisedExactly sends the insert statement of
// DuckDB's client and texts that resemble it. Before, any text that began
// like it and ended in ")" was taken for a stream: the insert ran and the
// rest of the text was dropped without a word (`…); DROP TABLE s; SELECT
// (1)` inserted and reported success). Now only the exact shape DuckDB
// 2.0's client sends opens a stream; every other text that calls
// scan_data_from_quack_client is refused with an error that says so, and
// nothing of it runs.
func TestInsertStreamIsRecognisedExactly(t *testing.T) {
	addr, _ := startServer(t, nil)
	c := connect(t, addr, wire.Q3)
	exec(t, c, `CREATE TABLE s(i INTEGER); CREATE SCHEMA n; CREATE SCHEMA n.sub; CREATE TABLE n.sub.t(i INTEGER); CREATE TABLE "odd.name ""x"""(i INTEGER)`)
	id := openQ3Session(t, addr)
	q3 := func(m wire.Message) wire.Message {
		t.Helper()
		status, data := postBytes(t, addr, encode(t, wire.Q3, wire.Header{Type: m.Type(), ConnectionID: id}, m))
		if status != http.StatusOK {
			t.Fatalf("HTTP %d", status)
		}
		_, msg, err := wire.DecodeMessage(data, wire.Q3, wire.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return msg
	}
	chunk, _ := wire.ChunkFromRows([]wire.LogicalType{{ID: wire.TypeInteger}}, [][]any{{int32(7)}})
	const stream = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
	const call = "scan_data_from_quack_client('" + stream + "', NULL::STRUCT(col0 INTEGER), ordered := true)"

	t.Run("refused", func(t *testing.T) {
		for _, sql := range []string{
			"INSERT INTO s SELECT * FROM " + call + "; DROP TABLE s; SELECT (1)",
			"INSERT INTO s SELECT * FROM scan_data_from_quack_client('" + stream + "', NULL::STRUCT(col0 INTEGER); DROP TABLE s; SELECT (1), ordered := true)",
			"INSERT INTO s SELECT * FROM " + call + ";",
			"INSERT INTO s SELECT * FROM " + call + " -- trailing",
			"insert into s select * from " + call,
			"INSERT INTO s  SELECT * FROM " + call,
			"INSERT INTO s (i) SELECT * FROM " + call,
			"INSERT INTO s SELECT * FROM scan_data_from_quack_client('" + stream + "')",
			"INSERT INTO s SELECT * FROM scan_data_from_quack_client('" + stream + "', NULL::STRUCT(c1 INTEGER), ordered := true)",
			"INSERT INTO s SELECT * FROM scan_data_from_quack_client('" + stream + "', NULL::STRUCT(col0 INTEGER), ordered := maybe)",
			"INSERT INTO s SELECT * FROM scan_data_from_quack_client('" + stream + "', NULL::STRUCT(col0 INTEGER; DROP TABLE s), ordered := true)",
			"INSERT INTO s SELECT i + 1 FROM " + call,
			"SELECT * FROM " + call,
			"MERGE INTO s USING (SELECT * FROM " + call + ") AS d ON false WHEN NOT MATCHED THEN INSERT VALUES (d.col0)",
			"DROP TABLE s; INSERT INTO s SELECT * FROM " + call,
		} {
			msg := q3(&wire.PrepareRequest{SQL: sql, QueryUUID: wire.Hugeint{Lower: 5}, InlineRows: wire.Idx(0)})
			e, ok := msg.(*wire.ErrorResponse)
			if !ok || !strings.Contains(e.Message, "scan_data_from_quack_client") {
				t.Fatalf("%s\nanswered %T %+v, want an error about scan_data_from_quack_client", sql, msg, msg)
			}
			// No stream was opened, and nothing of the text ran.
			if e, ok := q3(&wire.SendDataRequest{StreamID: stream, BatchIndex: wire.Idx(1), Chunks: []*wire.DataChunk{chunk}}).(*wire.ErrorResponse); !ok || !strings.Contains(e.Message, "No active data stream") {
				t.Fatalf("%s\nopened a stream", sql)
			}
			if got := queryRows(t, c, "SELECT count(*) FROM s"); got[0][0] != int64(0) {
				t.Fatalf("%s\ninserted %v rows", sql, got[0][0])
			}
		}
	})

	t.Run("recognised", func(t *testing.T) {
		for i, c2 := range []struct{ target, count, proto, ordered string }{
			{"s", "s", "col0 INTEGER", "true"},
			{"s", "s", "col0 INTEGER", "false"},
			{"main.s", "s", "col0 INTEGER", "true"},
			{"n.sub.t", "n.sub.t", "col0 INTEGER", "true"},
			{`"odd.name ""x"""`, `"odd.name ""x"""`, "col0 INTEGER", "true"},
			// The prototype's types are DuckDB's own rendering: nested
			// types, quoted names and literals, and what they may hold.
			{"s", "s", `col0 STRUCT("a)b" INTEGER, c DECIMAL(18,3)[], m MAP(VARCHAR, ENUM('x)', 'y''z;')))`, "true"},
		} {
			sql := "INSERT INTO " + c2.target + " SELECT * FROM scan_data_from_quack_client('" + stream + "', NULL::STRUCT(" + c2.proto + "), ordered := " + c2.ordered + ")"
			uuid := wire.Hugeint{Lower: uint64(100 + i)}
			if msg := q3(&wire.PrepareRequest{SQL: sql, QueryUUID: uuid, InlineRows: wire.Idx(0)}); msg.Type() != wire.MsgPrepareResponse {
				t.Fatalf("%s\nanswered %+v", sql, msg)
			}
			if msg := q3(&wire.SendDataRequest{StreamID: stream, BatchIndex: wire.Idx(1), Chunks: []*wire.DataChunk{chunk}}); msg.Type() != wire.MsgSendDataResponse {
				t.Fatalf("%s\nbatch answered %+v", sql, msg)
			}
			if msg := q3(&wire.SendDataRequest{StreamID: stream, TotalBatches: wire.Idx(1)}); msg.Type() != wire.MsgSendDataResponse {
				t.Fatalf("%s\nclose answered %+v", sql, msg)
			}
			if got := queryRows(t, c, "SELECT count(*) FROM "+c2.count); got[0][0] != int64(1) {
				t.Fatalf("%s\nleft %v rows, want 1", sql, got[0][0])
			}
			exec(t, c, "DELETE FROM "+c2.count)
		}
	})

	t.Run("Q1", func(t *testing.T) {
		// A Q1 session has no data streams: the statement is refused
		// rather than handed to DuckDB, which has no such function.
		q1 := openSession(t, addr)
		status, _, msg := post(t, addr, encode(t, wire.Q1, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: q1},
			&wire.PrepareRequest{SQL: "INSERT INTO s SELECT * FROM " + call}))
		wantError(t, status, msg, "scan_data_from_quack_client")
	})
}
