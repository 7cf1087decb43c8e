package freeport

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// claimedAddr hands out an address and returns it with the first port of
// its block; it skips the test where blocks cannot be locked.
func claimedAddr(t *testing.T) (addr string, blockStart int) {
	t.Helper()
	if lockDir == "" {
		t.Skip("no lock directory")
	}
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	_, portText, _ := net.SplitHostPort(a)
	port, _ := strconv.Atoi(portText)
	return a, low + (port-low)/blockSize*blockSize
}

// TestBlocksAreClaimed: every port handed out is in a block whose lock
// file this process holds, so another process (another open of the file)
// cannot take the block.
func TestBlocksAreClaimed(t *testing.T) {
	a, start := claimedAddr(t)
	f, err := os.Open(filepath.Join(lockDir, fmt.Sprintf("block-%d.lock", start)))
	if err != nil {
		t.Fatalf("the block of %s has no lock file: %v", a, err)
	}
	defer f.Close()
	if err := tryLock(f); err == nil {
		t.Errorf("the block of %s could be locked again: another process could take its ports", a)
	}
}

// TestLocksIgnoreTMPDIR starts this test binary again with its own
// $TMPDIR, as a benchmark script gives each run, and has it try to lock a
// block this process holds. Before, the lock files lived under
// os.TempDir(): the child locked a file of its own and handed out the same
// ports (a benchmark's duckraftd then held the Raft port of a test's node).
func TestLocksIgnoreTMPDIR(t *testing.T) {
	if os.Getenv("FREEPORT_CHILD_BLOCK") != "" {
		return
	}
	_, start := claimedAddr(t)
	cmd := exec.Command(os.Args[0], "-test.run", "^TestChildLocksBlock$", "-test.v")
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "FREEPORT_CHILD_BLOCK="+strconv.Itoa(start))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "refused") {
		t.Fatalf("a process with another TMPDIR could lock block %d this one holds:\n%s", start, out)
	}
}

// TestChildLocksBlock is TestLocksIgnoreTMPDIR's child: it reports whether
// it could lock the block it is given.
func TestChildLocksBlock(t *testing.T) {
	start := os.Getenv("FREEPORT_CHILD_BLOCK")
	if start == "" {
		t.Skip("run by TestLocksIgnoreTMPDIR")
	}
	f, err := os.OpenFile(filepath.Join(lockDir, "block-"+start+".lock"), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := tryLock(f); err != nil {
		t.Log("refused")
		return
	}
	t.Log("locked")
}
