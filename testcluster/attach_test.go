package testcluster_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// q1Fixtures holds requests an unmodified DuckDB v1.5.4 client sent to
// DuckDB's own Quack server (shared/ sits beside the project root).
const q1Fixtures = "../../shared/fixtures/quack-wire/q1-duckdb-1.5"

// replay sends a captured client session to a node, with the node's
// session id and result uuids substituted, and returns the answers.
func replay(t *testing.T, n *testcluster.Node, name string) []wire.Message {
	t.Helper()
	all, _ := filepath.Glob(filepath.Join(q1Fixtures, "*-"+name+"-*-request.bin"))
	// "append" must not pick up the "append-check" case's files.
	var files []string
	for _, f := range all {
		_, rest, _ := strings.Cut(filepath.Base(f), "-")
		step, _, _ := strings.Cut(strings.TrimPrefix(rest, name+"-"), "-")
		switch step {
		case "connect", "catalog", "begin", "create", "commit", "append", "disconnect", "query", "scan", "fetch":
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		if _, err := os.Stat(q1Fixtures); err != nil {
			t.Skipf("fixtures not found at %s: %v", q1Fixtures, err)
		}
		t.Fatalf("no fixtures for %q", name)
	}
	sort.Strings(files)
	var id string
	var uuid wire.Hugeint
	var out []wire.Message
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h, msg, err := wire.DecodeMessage(raw, wire.Q1, wire.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if h.Type == wire.MsgConnectionRequest {
			msg.(*wire.ConnectionRequest).AuthString = testcluster.Token
		} else {
			h.ConnectionID = id
		}
		if fr, ok := msg.(*wire.FetchRequest); ok {
			fr.UUID = uuid
		}
		body, err := wire.AppendMessage(nil, wire.Q1, h, msg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post("http://"+n.QuackAddr+"/quack", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		rh, rmsg, err := wire.DecodeMessage(data, wire.Q1, wire.Limits{})
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		if e, ok := rmsg.(*wire.ErrorResponse); ok {
			t.Fatalf("%s: %s", filepath.Base(f), e.Message)
		}
		if rh.Type == wire.MsgConnectionResponse {
			id = rh.ConnectionID
		}
		if p, ok := rmsg.(*wire.PrepareResponse); ok {
			uuid = p.UUID
		}
		out = append(out, rmsg)
	}
	return out
}

// attachedDuckDBClientOnCluster (TestSharedCluster) plays what a DuckDB 1.5
// client sends for ATTACH, CREATE TABLE remote.t … and INSERT INTO remote.t
// VALUES … (BEGIN, CREATE, COMMIT, then APPEND) to a follower of a 3-node
// cluster, and checks that the table and rows reach every node while the
// catalog an attaching client loads shows no internal schema.
func attachedDuckDBClientOnCluster(t *testing.T, c *testcluster.Cluster) {
	if _, err := os.Stat(q1Fixtures); err != nil {
		t.Skipf("fixtures not found at %s: %v", q1Fixtures, err)
	}
	leader := c.WaitForLeader(t, 10*time.Second)
	var follower *testcluster.Node
	for _, n := range c.Nodes {
		if n != leader {
			follower = n
			break
		}
	}
	answers := replay(t, follower, "append")
	// The catalog loads come back whole and without _duckraft.
	schemas := answers[1].(*wire.PrepareResponse)
	if schemas.NeedsMoreFetch {
		t.Fatal("catalog schemas not answered inline")
	}
	for _, ch := range schemas.Chunks {
		for i := 0; i < ch.Rows; i++ {
			s, _ := ch.Columns[1].Text(i)
			if strings.HasPrefix(s, "_duckraft") {
				t.Fatalf("internal schema %q shown to an attaching client", s)
			}
		}
	}
	c.WaitConverged(t, 10*time.Second)
	for _, n := range c.Nodes {
		conn := n.Client(t)
		exec(t, conn, "SET duckraft_consistency = 'any'")
		if got := queryInts(t, conn, "SELECT count(*) FROM t_append WHERE s IS NULL OR length(s) > 0"); got[0] != 3 {
			t.Fatalf("%s holds %d rows of t_append, want 3", n.ID, got[0])
		}
	}
	// Another client reads the table back on another node.
	rows := replay(t, c.Nodes[2], "append-check")[1].(*wire.PrepareResponse)
	if len(rows.Chunks) != 1 || rows.Chunks[0].Rows != 3 {
		t.Fatalf("append-check read %d chunks", len(rows.Chunks))
	}
}
