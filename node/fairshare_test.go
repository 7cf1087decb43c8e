package node_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

// The tokens of the fair-share tests: a heavy client's, a bystander's.
const (
	heavyToken     = "heavy-token-0123456789"
	bystanderToken = "bystander-token-0123456789"
)

// startShared serves a fresh database with the gate of limit turns (the
// per-client share is the default's) and a wait longer than the tests
// wait for an answer, so that the flood's statements stay queued; it
// accepts testToken, heavyToken and bystanderToken, and knows members by
// memberCred.
func startShared(t *testing.T, limit int) (string, *node.Server) {
	t.Helper()
	var set *tokens.Set
	for _, tok := range []string{testToken, heavyToken, bystanderToken} {
		set = set.Add(tok, tokens.Admin)
	}
	return startServer(t, func(c *node.Config) {
		c.Authenticator = node.KeyringAuth{Keyring: tokens.NewKeyring(set)}
		c.MaxRunningStatements, c.AdmissionWait, c.MemberCredential = limit, 10*time.Minute, memberCred
	})
}

const memberCred = "member-credential-0123456789"

// party is who sends statements: a token, the loopback address its
// connections come from, and the headers of its every request.
type party struct {
	token, ip string
	header    http.Header
}

// session opens a Q3 session of p on addr.
func (p party) session(t *testing.T, addr string) *client.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(p.ip)}}
	// No client timeout: the flood's statements run until cancelled.
	hc := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, addr, client.Options{Token: p.token, Generation: wire.Q3, HTTPClient: hc, Header: p.header})
	if err != nil {
		t.Fatalf("connect as %s from %s: %v", p.token, p.ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// flood runs longScan on n sessions of p, one after the other into the
// gate (each waits until the gate holds it, running or queued), and
// returns the function that cancels them all and waits for their ends.
func (p party) flood(t *testing.T, addr string, srv *node.Server, n int) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		c := p.session(t, addr)
		before := srv.AdmissionStats()
		wg.Go(func() {
			if _, err := c.Query(ctx, longScan); err == nil {
				t.Errorf("%s finished: it should have run until cancelled", longScan)
			}
		})
		waitAdmission(t, srv, "a flood statement to reach the gate", func(st node.AdmissionStats) bool {
			return st.Running+st.Queued == before.Running+before.Queued+1
		})
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// answers runs SELECT 42 as p and fails the test unless it is answered
// within a minute: a turn is free for it, or the next one given back is
// its, so it waits for no flood statement to end (they run until
// cancelled), and a minute is more than a loaded machine needs otherwise.
func (p party) answers(t *testing.T, addr string) {
	t.Helper()
	c := p.session(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := c.Query(ctx, "SELECT 42")
	if err != nil {
		t.Fatalf("the bystander's SELECT 42 beside the flood: %v", err)
	}
	defer rows.Close()
	if !rows.Next() {
		t.Fatalf("the bystander's SELECT 42: no row: %v", rows.Err())
	}
}

// TestNoClientTakesEveryTurn is the attack of issue 31 on the turns
// themselves: one client floods a node with more heavy statements than it
// has turns, from many sessions, and a bystander's SELECT 42 must still be
// answered while the flood runs and its statements wait. Each client
// holds at most its share of the turns (MaxRunningStatementsPerClient, by
// default half of them), so a turn stays free for the others; a client is
// its token and its address, so the bystander may share either. Before,
// the turns were one queue for everybody: the flood held every turn and
// queued the rest, and the bystander waited behind it and was refused
// busy.
func TestNoClientTakesEveryTurn(t *testing.T) {
	const limit, flood = 2, 6
	cases := []struct {
		name             string
		heavy, bystander party
	}{
		{"another token from the same address", party{token: heavyToken, ip: "127.0.0.1"}, party{token: bystanderToken, ip: "127.0.0.1"}},
		{"the same token from another address", party{token: heavyToken, ip: "127.0.0.2"}, party{token: heavyToken, ip: "127.0.0.3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr, srv := startShared(t, limit)
			stop := tc.heavy.flood(t, addr, srv, flood)
			defer stop()
			tc.bystander.answers(t, addr)
			// The bystander's turn is given back as its result closes.
			waitAdmission(t, srv, "the flood alone in the gate", func(st node.AdmissionStats) bool { return st.Running+st.Queued == flood })
			if st := srv.AdmissionStats(); st.PeakRunning > limit || st.Refused != 0 {
				t.Errorf("stats %+v: want at most %d ever running, none refused", st, limit)
			}
		})
	}
}

// TestNextTurnGoesToTheClientHoldingFewest: two clients hold every turn
// and each has more statements queued; a bystander queues after them all.
// When one turn is given back, the bystander, holding none, gets it ahead
// of every statement queued before it. Before, the queue was served in
// arrival order: the flood's next statement took the turn, and the
// bystander waited and was refused busy.
func TestNextTurnGoesToTheClientHoldingFewest(t *testing.T) {
	const limit = 2
	addr, srv := startShared(t, limit)
	first := party{token: heavyToken, ip: "127.0.0.2"}
	second := party{token: heavyToken, ip: "127.0.0.3"}
	stopFirstRunning := first.flood(t, addr, srv, 1)
	defer second.flood(t, addr, srv, 1)()
	waitAdmission(t, srv, "the two clients to hold every turn", func(st node.AdmissionStats) bool { return st.Running == limit })
	defer first.flood(t, addr, srv, 3)()
	defer second.flood(t, addr, srv, 3)()

	bystander := party{token: bystanderToken, ip: "127.0.0.1"}
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		bystander.answers(t, addr)
	}()
	waitAdmission(t, srv, "the bystander to queue", func(st node.AdmissionStats) bool { return st.Queued == 7 })
	stopFirstRunning()
	<-answered
	// The bystander's turn then goes to the first client's next.
	waitAdmission(t, srv, "every turn held by the flood again", func(st node.AdmissionStats) bool { return st.Running == limit && st.Queued == 5 })
	if st := srv.AdmissionStats(); st.Refused != 0 {
		t.Errorf("stats %+v: want none refused", st)
	}
}

// TestRoutedReadsCountForTheirClient: a read another node routes here
// comes on that member's session, and the member names the client it
// carries (node.PrincipalHeader); the statement counts for that client,
// so one client's reads routed through a member do not take the turns of
// the others routed through it. Only a member is believed: a client that
// names a different client on each of its sessions is still one client.
func TestRoutedReadsCountForTheirClient(t *testing.T) {
	const limit, flood = 2, 4
	t.Run("a member names the client", func(t *testing.T) {
		addr, srv := startShared(t, limit)
		heavy := party{token: testToken, ip: "127.0.0.2", header: http.Header{wire.MemberHeader: {memberCred}, node.PrincipalHeader: {"heavy@192.0.2.1"}}}
		bystander := party{token: testToken, ip: "127.0.0.2", header: http.Header{wire.MemberHeader: {memberCred}, node.PrincipalHeader: {"bystander@192.0.2.2"}}}
		defer heavy.flood(t, addr, srv, flood)()
		bystander.answers(t, addr)
		waitAdmission(t, srv, "the flood alone in the gate", func(st node.AdmissionStats) bool { return st.Running+st.Queued == flood })
	})
	t.Run("a client's claim is ignored", func(t *testing.T) {
		addr, srv := startShared(t, limit)
		var stops []func()
		for i := range flood {
			forger := party{token: heavyToken, ip: "127.0.0.2", header: http.Header{node.PrincipalHeader: {string(rune('a'+i)) + "@192.0.2.9"}}}
			stops = append(stops, forger.flood(t, addr, srv, 1))
		}
		defer func() {
			for _, stop := range stops {
				stop()
			}
		}()
		if st := srv.AdmissionStats(); st.Running != 1 || st.Queued != flood-1 {
			t.Errorf("stats %+v: want the forger's statements to share one client's turn (1 running, %d queued)", st, flood-1)
		}
	})
}
