package freeport

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
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

// TestBlocksAreClaimed: every port handed out is in a block whose lock
// file this process holds, so another process (another open of the file)
// cannot take the block.
func TestBlocksAreClaimed(t *testing.T) {
	if lockDir == "" {
		t.Skip("no lock directory")
	}
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	_, portText, _ := net.SplitHostPort(a)
	port, _ := strconv.Atoi(portText)
	start := low + (port-low)/blockSize*blockSize
	f, err := os.Open(filepath.Join(lockDir, fmt.Sprintf("block-%d.lock", start)))
	if err != nil {
		t.Fatalf("the block of %s has no lock file: %v", a, err)
	}
	defer f.Close()
	if err := tryLock(f); err == nil {
		t.Errorf("the block of %s could be locked again: another process could take its ports", a)
	}
}
