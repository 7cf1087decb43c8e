// Package freeport hands out loopback addresses for processes a test or a
// benchmark is about to start.
//
// Asking the kernel for port 0 and closing the listener is not enough: the
// kernel gives the same port to the next outgoing connection or the next
// caller soon after, and a node that then binds it fails to start. Ports
// here come from below Linux's ephemeral range (32768 and up), so no
// outgoing connection takes one between Addr and the node's bind, and each
// is handed out at most once per process.
package freeport

import (
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

const (
	low  = 20000
	high = 32000
)

// ErrExhausted is returned when no free port was found.
var ErrExhausted = errors.New("freeport: no free loopback port")

var (
	mu   sync.Mutex
	used = map[int]bool{}
)

// Addr returns "127.0.0.1:port" for a port free for both TCP and UDP at
// the time of the call (memberlist binds both on its gossip port) and not
// returned before by this process.
func Addr() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 10000 {
		p := low + rand.IntN(high-low)
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
