package freeport

import (
	"net"
	"testing"
)

func TestAddrIsFreeAndNotRepeated(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		a, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
	// One of them is still bindable, for TCP and UDP.
	for a := range seen {
		l, err := net.Listen("tcp", a)
		if err != nil {
			t.Fatalf("tcp %s: %v", a, err)
		}
		l.Close()
		u, err := net.ListenPacket("udp", a)
		if err != nil {
			t.Fatalf("udp %s: %v", a, err)
		}
		u.Close()
		break
	}
}
