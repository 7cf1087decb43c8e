// Package freeport hands out loopback addresses for processes a test or a
// benchmark is about to start.
//
// Asking the kernel for port 0 and closing the listener is not enough: the
// kernel gives the same port to the next outgoing connection or the next
// caller soon after, and a node that then binds it fails to start. Ports
// here come from below Linux's ephemeral range (32768 and up), so no
// outgoing connection takes one between Addr and the node's bind, and each
// is handed out at most once per process.
//
// Test binaries running at the same time on one machine (go test runs
// packages in parallel; several checkouts may test at once) would still
// pick the same ports now and then, and a node restarted on its port finds
// it taken by another process's node. So a process claims blocks of ports
// with an exclusive lock on a file per block in /tmp (whatever $TMPDIR
// says: two processes with different TMPDIRs each locked their own files,
// and a benchmark's node took the Raft port of a test's), held until the process exits (the kernel drops the lock even
// after SIGKILL), and hands out ports of its own blocks only.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

const (
	low       = 20000
	high      = 32000
	blockSize = 100
	blocks    = (high - low) / blockSize
)

// ErrExhausted is returned when no free port was found.
var ErrExhausted = errors.New("freeport: no free loopback port")

var (
	mu   sync.Mutex
	used = map[int]bool{}
	// claimed are the starts of the blocks this process holds, and locks
	// their lock files, kept open so that the locks last.
	claimed []int
	locks   []*os.File
	// lockDir is where the blocks' lock files are; "" when it cannot be
	// made, and then ports are picked from the whole range, as unclaimed.
	lockDir = func() string {
		d := filepath.Join(sharedTempDir, "duckraft-freeport")
		if err := os.MkdirAll(d, 0o777); err != nil {
			return ""
		}
		// MkdirAll's mode is cut by the umask: every user's processes
		// must be able to add lock files.
		os.Chmod(d, 0o777|os.ModeSticky)
		return d
	}()
)

// Addr returns "127.0.0.1:port" for a port free for both TCP and UDP at
// the time of the call (memberlist binds both on its gossip port), not
// returned before by this process, and in a block no other process that
// uses this package holds.
func Addr() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if lockDir == "" {
		return pick(func() int { return low + rand.IntN(high-low) }, 10000)
	}
	for _, start := range claimed {
		if addr, err := fromBlock(start); err == nil {
			return addr, nil
		}
	}
	for range 4 * blocks {
		start, err := claim()
		if err != nil {
			return "", err
		}
		if addr, err := fromBlock(start); err == nil {
			return addr, nil
		}
	}
	return "", ErrExhausted
}

// fromBlock picks a free port of the block at start.
func fromBlock(start int) (string, error) {
	next := start
	return pick(func() int { p := next; next++; return p }, blockSize)
}

// pick tries up to tries ports that next names.
func pick(next func() int, tries int) (string, error) {
	for range tries {
		p := next()
		if used[p] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		used[p] = true
		return addr, nil
	}
	return "", ErrExhausted
}

// claim locks a block no process holds, starting at a random one, and
// returns its first port.
func claim() (int, error) {
	first := rand.IntN(blocks)
	for i := range blocks {
		b := (first + i) % blocks
		start := low + b*blockSize
		if held(start) {
			continue
		}
		f, err := os.OpenFile(filepath.Join(lockDir, fmt.Sprintf("block-%d.lock", start)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			continue
		}
		if err := tryLock(f); err != nil {
			f.Close()
			continue
		}
		claimed = append(claimed, start)
		locks = append(locks, f)
		return start, nil
	}
	return 0, ErrExhausted
}

func held(start int) bool {
	for _, s := range claimed {
		if s == start {
			return true
		}
	}
	return false
}
