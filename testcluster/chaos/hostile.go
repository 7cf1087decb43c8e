package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/duckraft/duckraft/node/client"
	"github.com/duckraft/duckraft/node/wire"
	"github.com/duckraft/duckraft/testcluster"
)

// The clients' faults: what a heavy or hostile client does to a node. The
// cluster runs with a small memory limit (nodeMemory) so that memory is
// contended, as on a loaded production node.
const (
	// nodeMemory is every node's --memory-limit in a chaos run.
	nodeMemory = "512MB"
	// pressureReads is a read that takes most of nodeMemory.
	pressureReads = "SELECT len(list(range ORDER BY range)) FROM range(3000000)"
	// impossibleSQL needs far more memory than nodeMemory: the leader
	// must refuse it before it enters the log.
	impossibleSQL = "CREATE TABLE chaos_oom AS SELECT list(range ORDER BY range) AS l FROM range(60000000)"
)

// pressure runs memory-hungry reads in several sessions on n until ctx
// ends, and reports how many ran and how many failed.
func pressure(ctx context.Context, n *testcluster.Node) (ran, failed int64) {
	var wg sync.WaitGroup
	var r, f atomic.Int64
	for range 3 {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			conn, err := client.Connect(cctx, "quack:"+n.QuackAddr, client.Options{Token: testcluster.Token, Generation: wire.Q1})
			cancel()
			if err != nil {
				return
			}
			defer conn.Close()
			for ctx.Err() == nil {
				_, err := conn.Exec(ctx, pressureReads)
				r.Add(1)
				if err != nil {
					f.Add(1)
					// Held while the applier needs the memory.
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return r.Load(), f.Load()
}

// tryImpossibleWrite sends impossibleSQL through n and says how it was
// answered: refused is the only right answer.
func tryImpossibleWrite(ctx context.Context, n *testcluster.Node) string {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	conn, err := client.Connect(cctx, "quack:"+n.QuackAddr, client.Options{Token: testcluster.Token, Generation: wire.Q1})
	if err != nil {
		return fmt.Sprintf("connect: %v", err)
	}
	defer conn.Close()
	_, err = conn.Exec(cctx, impossibleSQL)
	switch {
	case err == nil:
		return "APPLIED (it should have been refused)"
	case strings.Contains(err.Error(), "was not applied"):
		return refusedBeforeLog
	}
	return fmt.Sprintf("failed otherwise: %v", err)
}

// refusedBeforeLog is how tryImpossibleWrite reports the right answer.
const refusedBeforeLog = "refused before the log"

// impossibleWritesRefused is the verdict on the impossible writes of a run:
// each must have been refused before it entered the log.
func impossibleWritesRefused(events []event) verdict {
	v := verdict{name: "impossible writes refused before the log", ok: true, detail: "none sent"}
	n := 0
	for _, ev := range events {
		if ev.fault != impossibleWrite {
			continue
		}
		n++
		if ev.detail != refusedBeforeLog {
			return verdict{name: v.name, detail: fmt.Sprintf("step %d: %s", ev.step, ev.detail)}
		}
	}
	if n > 0 {
		v.detail = fmt.Sprintf("%d of %d", n, n)
	}
	return v
}

// hostile sends n what a stranger without a token can: idle connections,
// large bodies without a credential, and handshakes with a wrong token,
// until ctx ends. It reports what it sent.
func hostile(ctx context.Context, n *testcluster.Node) string {
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 300 {
		c, err := net.DialTimeout("tcp", n.QuackAddr, time.Second)
		if err != nil {
			break
		}
		idle = append(idle, c)
	}
	var bodies, handshakes atomic.Int64
	hc := &http.Client{Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				// A large body from a client with no session: the node
				// must not buffer it.
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+n.QuackAddr+"/quack",
					io.LimitReader(zeroes{}, 200<<20))
				if err != nil {
					return
				}
				if resp, err := hc.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				bodies.Add(1)
			}
		})
	}
	wg.Go(func() {
		body, err := wire.AppendMessage(nil, wire.Q3, wire.Header{Type: wire.MsgConnectionRequest},
			&wire.ConnectionRequest{AuthString: "not the token", MinVersion: 3, MaxVersion: 3, HeartbeatTimeoutSeconds: 60})
		if err != nil {
			return
		}
		for ctx.Err() == nil {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+n.QuackAddr+"/quack", bytes.NewReader(body))
			if err != nil {
				return
			}
			if resp, err := hc.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			handshakes.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
	})
	wg.Wait()
	return fmt.Sprintf("%d idle connections, %d unauthenticated 200 MB bodies, %d handshakes with a wrong token",
		len(idle), bodies.Load(), handshakes.Load())
}

// zeroes reads as zero bytes for ever.
type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
