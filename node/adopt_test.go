package node_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

// adoptedKey is the Session value slowAdopter installs.
type adoptedKey struct{}

// slowAdopter is a Migrator that adopts every session it is asked about,
// slowly: Adopt installs the session's state only once release is closed.
// Its Query refuses a session that has none, as routing's would run it
// without the state it lost with its node (outside its lost transaction).
type slowAdopter struct {
	node.LocalExecutor
	adopting chan struct{} // closed when the first Adopt began
	release  chan struct{}
	began    atomic.Bool
	early    atomic.Int64 // statements served before the state was there
}

func (m *slowAdopter) Query(ctx context.Context, s *node.Session, sql string) (node.Rows, error) {
	if s.Value(adoptedKey{}) == nil {
		m.early.Add(1)
		return nil, errors.New("served before its adoption installed the session's state")
	}
	return m.LocalExecutor.Query(ctx, s, sql)
}

func (m *slowAdopter) SessionOpened(*node.Session) {}

func (m *slowAdopter) Locate(context.Context, node.SessionClaims, int, string) (node.Locus, error) {
	return node.Locus{Adopt: true, Credential: testToken, From: "n1", State: "state"}, nil
}

func (m *slowAdopter) Adopt(_ context.Context, s *node.Session, state any) error {
	if m.began.CompareAndSwap(false, true) {
		close(m.adopting)
	}
	<-m.release
	s.SetValue(adoptedKey{}, state)
	return nil
}

func (m *slowAdopter) Alive(string) bool        { return false }
func (m *slowAdopter) Moved(*node.Session) bool { return false }

// TestNoRequestServedBeforeItsSessionIsAdopted: requests of a session that
// arrive while this node adopts it wait for the adoption, rather than run
// in the session before its state (an open transaction it lost, its
// consistency level) is installed.
func TestNoRequestServedBeforeItsSessionIsAdopted(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	mig := &slowAdopter{adopting: make(chan struct{}), release: make(chan struct{})}
	addr, _ := startServer(t, func(c *node.Config) {
		c.Executor = mig
		c.MemberCredential = "member-credential-0123456789"
		c.Cluster = &node.ClusterSessions{IDs: node.NewSessionIDs("n2", key)}
	})
	// A session that n1, now dead, opened.
	id := node.NewSessionIDs("n1", key).New(wire.Q3, tokens.Admin)
	post := func() (string, error) {
		body, err := wire.AppendMessage(nil, wire.Q3, wire.Header{Type: wire.MsgPrepareRequest, ConnectionID: id},
			&wire.PrepareRequest{SQL: "SELECT 42", HasQueryUUID: true, QueryUUID: wire.RandomUUID()})
		if err != nil {
			return "", err
		}
		req, err := http.NewRequest(http.MethodPost, "http://"+strings.TrimPrefix(addr, "quack:")+"/quack", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return "", err
		}
		h, rest, err := wire.DecodeHeader(data)
		if err != nil {
			return "", err
		}
		m, err := wire.DecodeBody(wire.Q3, h.Type, rest, wire.Limits{})
		if err != nil {
			return "", err
		}
		if e, ok := m.(*wire.ErrorResponse); ok {
			return "", errors.New(e.Message)
		}
		return "answered", nil
	}
	first := make(chan error, 1)
	go func() {
		_, err := post()
		first <- err
	}()
	select {
	case <-mig.adopting:
	case err := <-first:
		t.Fatalf("the first request was answered without an adoption: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the first request started no adoption")
	}
	second := make(chan error, 1)
	go func() {
		_, err := post()
		second <- err
	}()
	select {
	case err := <-second:
		t.Fatalf("a request was answered while its session was being adopted: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(mig.release)
	for _, ch := range []chan error{first, second} {
		if err := <-ch; err != nil {
			t.Errorf("after the adoption: %v", err)
		}
	}
	if n := mig.early.Load(); n > 0 {
		t.Fatalf("%d statements ran in the session before its adoption installed its state", n)
	}
}
