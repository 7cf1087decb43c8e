package node_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/wire"
)

// q1Fixtures holds request/response bodies captured between an unmodified
// DuckDB v1.5.4 client and DuckDB's own quack_serve (the steering repo's
// shared/ folder sits beside the project root).
const q1Fixtures = "../../shared/fixtures/quack-wire/q1-duckdb-1.5"

// fixtureToken is the token the captured client sent.
const fixtureToken = "q1-golden-token-0123456789"

func withFixtureToken(c *node.Config) { c.Authenticator = node.TokenAuth{Token: fixtureToken} }

type exchange struct {
	name          string
	request, want []byte
}

// loadCase returns the exchanges of one captured case in order.
func loadCase(t *testing.T, name string) []exchange {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(q1Fixtures, "*-"+name+"-*-request.bin"))
	if err != nil || len(files) == 0 {
		if _, err := os.Stat(q1Fixtures); err != nil {
			t.Skipf("fixtures not found at %s: %v", q1Fixtures, err)
		}
		t.Fatalf("no fixtures for case %q", name)
	}
	sort.Strings(files)
	var out []exchange
	for _, f := range files {
		req, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := os.ReadFile(strings.TrimSuffix(f, "-request.bin") + "-response.bin")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, exchange{name: filepath.Base(f), request: req, want: resp})
	}
	return out
}

// decodeQ1 decodes a whole Q1 message.
func decodeQ1(t *testing.T, raw []byte) (wire.Header, wire.Message) {
	t.Helper()
	h, msg, err := wire.DecodeMessage(raw, wire.Q1, wire.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return h, msg
}

// withSession re-encodes a captured request for our session id and, for a
// FETCH, the result uuid our server issued.
func withSession(t *testing.T, raw []byte, id string, uuid ...wire.Hugeint) []byte {
	t.Helper()
	h, msg := decodeQ1(t, raw)
	if h.ConnectionID != "" {
		h.ConnectionID = id
	}
	if f, ok := msg.(*wire.FetchRequest); ok && len(uuid) > 0 {
		f.UUID = uuid[0]
	}
	return encode(t, wire.Q1, h, msg)
}

// resultUUID returns the uuid of a PREPARE_RESPONSE body, if it is one.
func resultUUID(t *testing.T, raw []byte) (wire.Hugeint, bool) {
	t.Helper()
	_, msg := decodeQ1(t, raw)
	p, ok := msg.(*wire.PrepareResponse)
	if !ok {
		return wire.Hugeint{}, false
	}
	return p.UUID, true
}

var caretRuns = regexp.MustCompile(`\^+`)

// normalize zeroes what differs from run to run (connection ids in the
// header, result uuids), and what DuckDB 2.0 words differently from the
// captured 1.5 server (the server version, an error's LINE marker), and
// re-encodes, so bodies compare byte for byte.
func normalize(t *testing.T, raw []byte) []byte {
	t.Helper()
	h, msg := decodeQ1(t, raw)
	if h.ConnectionID != "" {
		h.ConnectionID = "SESSION"
	}
	if p, ok := msg.(*wire.PrepareResponse); ok {
		p.UUID = wire.Hugeint{}
	}
	if c, ok := msg.(*wire.ConnectionResponse); ok {
		c.ServerDuckDBVersion, c.ServerPlatform = "VERSION", "PLATFORM"
	}
	if e, ok := msg.(*wire.ErrorResponse); ok {
		// DuckDB 2.0 underlines the whole token it points at in an
		// error's LINE marker (^^^^^^^^^^^^^), where the captured 1.5
		// server put one caret; the rest of the message is the same.
		e.Message = caretRuns.ReplaceAllString(e.Message, "^")
	}
	return encode(t, wire.Q1, h, msg)
}

// TestReplayQ1Captures plays the requests of a real DuckDB v1.5.4 client to
// our server and checks the answers against DuckDB's own server's, byte for
// byte after normalizing ids, uuids and the server version. Catalog loads
// are compared by shape: our database has other objects than the captured
// one.
func TestReplayQ1Captures(t *testing.T) {
	cases := []struct {
		name  string
		setup string
		// exact lists the exchanges whose answers must be byte-identical.
		exact map[string]bool
	}{
		{"select42", "", map[string]bool{"11-select42-query-request.bin": true, "12-select42-disconnect-request.bin": true}},
		{"hello", "CREATE TABLE hello AS FROM VALUES ('world') v(s)", map[string]bool{"08-hello-scan-request.bin": true, "09-hello-disconnect-request.bin": true}},
		{"types", "", map[string]bool{"38-types-query-request.bin": true}},
		{"missing-table", "", map[string]bool{"41-missing-table-query-error-request.bin": true}},
		{"append", "", map[string]bool{"29-append-begin-request.bin": true, "30-append-create-table-request.bin": true,
			"31-append-commit-request.bin": true, "32-append-append-request.bin": true}},
		{"range5m", "", map[string]bool{"19-range5m-query-request.bin": true, "20-range5m-fetch-request.bin": true,
			"21-range5m-fetch-request.bin": true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := startServer(t, withFixtureToken)
			if tc.setup != "" {
				exec(t, connectWith(t, addr, wire.Q1, fixtureToken), tc.setup)
			}
			var id string
			var uuid wire.Hugeint
			for _, ex := range loadCase(t, tc.name) {
				req := ex.request
				if id != "" {
					req = withSession(t, req, id, uuid)
				}
				got := postRaw(t, addr, req)
				if u, ok := resultUUID(t, got); ok {
					uuid = u
				}
				h, _, err := wire.DecodeHeader(got)
				if err != nil {
					t.Fatalf("%s: %v", ex.name, err)
				}
				if h.Type == wire.MsgConnectionResponse {
					id = h.ConnectionID
				}
				wh, _, _ := wire.DecodeHeader(ex.want)
				if h.Type != wh.Type {
					t.Fatalf("%s: answered %v, DuckDB answered %v", ex.name, h.Type, wh.Type)
				}
				if tc.exact[ex.name] {
					if g, w := normalize(t, got), normalize(t, ex.want); !bytes.Equal(g, w) {
						t.Fatalf("%s: answer differs from DuckDB's %s", ex.name, firstDiff(g, w))
					}
				}
			}
		})
	}
}

// TestReplayRange5mBatches drives the whole 5M-row fetch sequence and checks
// the batch numbering and the final partial batch against the capture.
func TestReplayRange5mBatches(t *testing.T) {
	addr, _ := startServer(t, withFixtureToken)
	ex := loadCase(t, "range5m")
	id := ""
	got := postRaw(t, addr, ex[0].request)
	h, _, _ := wire.DecodeHeader(got)
	id = h.ConnectionID
	uuid, _ := resultUUID(t, postRaw(t, addr, withSession(t, ex[1].request, id)))
	fetch := withSession(t, ex[2].request, id, uuid)
	var last []byte
	for i := 1; ; i++ {
		resp := postRaw(t, addr, fetch)
		rh, rest, err := wire.DecodeHeader(resp)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := wire.DecodeBody(wire.Q1, rh.Type, rest, wire.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		fr, ok := msg.(*wire.FetchResponse)
		if !ok {
			t.Fatalf("fetch %d: %T", i, msg)
		}
		if len(fr.Chunks) == 0 {
			if i != 204 {
				t.Fatalf("end after %d fetches, DuckDB ended after 204", i)
			}
			if !bytes.Equal(normalize(t, resp), normalize(t, ex[5].want)) {
				t.Fatal("end marker differs from DuckDB's")
			}
			break
		}
		if fr.BatchIndex.Value != uint64(i) {
			t.Fatalf("fetch %d got batch index %v", i, fr.BatchIndex)
		}
		last = resp
	}
	// ex[4] is the captured last data batch (index 203, 6 chunks).
	if !bytes.Equal(normalize(t, last), normalize(t, ex[4].want)) {
		t.Fatal("last partial batch differs from DuckDB's")
	}
}

func postRaw(t *testing.T, addr string, body []byte) []byte {
	t.Helper()
	status, data := postBytes(t, addr, body)
	if status != 200 {
		t.Fatalf("HTTP %d", status)
	}
	return data
}

// firstDiff describes where got and want part.
func firstDiff(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	lo := max(0, i-16)
	return fmt.Sprintf("at byte %d of %d/%d:\n got …% x\nwant …% x", i, len(got), len(want),
		got[lo:min(len(got), i+24)], want[lo:min(len(want), i+24)])
}
