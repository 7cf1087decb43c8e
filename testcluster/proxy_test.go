package testcluster

import (
	"crypto/tls"
	"io"
	"testing"
	"time"

	"github.com/duckraft/duckraft/clusterkey"
)

// TestProxyIdentifiesByCertificate checks that a proxy names the dialer
// by the node ID in its member certificate: a partition that isolates n1
// refuses n1's link to n2 and lets n3's through.
func TestProxyIdentifiesByCertificate(t *testing.T) {
	nw := newNetwork(t)
	t.Cleanup(nw.close)
	key := clusterkey.Generate()
	nw.setKey(t, key)
	server, err := clusterkey.RaftTLS(key, "n2")
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	n2 := &Node{ID: "n2", RaftAddr: l.Addr().String()}
	nw.add(t, n2)
	nw.partition([][]string{{"n2", "n3"}}, []string{"n1", "n2", "n3"}, false)
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"n1", false},
		{"n3", true},
	} {
		conf, err := clusterkey.RaftTLS(key, tc.src)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.Dial("tcp", n2.RaftAdvertise, conf)
		if err != nil {
			t.Fatalf("%s: dial the proxy: %v", tc.src, err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		_, werr := c.Write([]byte("ping"))
		buf := make([]byte, 4)
		_, rerr := io.ReadFull(c, buf)
		c.Close()
		if got := werr == nil && rerr == nil && string(buf) == "ping"; got != tc.want {
			t.Errorf("%s → n2: link works %v, want %v (%v, %v)", tc.src, got, tc.want, werr, rerr)
		}
	}
}

// TestPartitionGroups checks which links a partition allows: within a
// group, not across, and unlisted nodes alone.
func TestPartitionGroups(t *testing.T) {
	nw := newNetwork(t)
	all := []string{"n1", "n2", "n3", "n4"}
	nw.partition([][]string{{"n1", "n2"}}, all, false)
	for _, tc := range []struct {
		src, dst string
		want     bool
	}{
		{"n1", "n2", true},
		{"n2", "n1", true},
		{"n1", "n3", false},
		{"n3", "n4", false},
		{"", "n1", false},
	} {
		if got := nw.allowed(tc.src, tc.dst); got != tc.want {
			t.Errorf("%q → %s: allowed %v, want %v", tc.src, tc.dst, got, tc.want)
		}
	}
	nw.heal()
	if !nw.allowed("n1", "n3") || !nw.allowed("", "n3") {
		t.Error("links still cut after heal")
	}
}
