package testcluster

import "testing"

// TestIdentify checks that a proxy names the sender from the first address
// in an RPC's bytes, preferring the longer of two addresses where one is a
// prefix of the other.
func TestIdentify(t *testing.T) {
	nw := newNetwork()
	nw.byAddr = map[string]string{
		"127.0.0.1:4000":  "n1",
		"127.0.0.1:40001": "n2",
		"127.0.0.1:5000":  "n3",
	}
	for _, tc := range []struct {
		name, head, want string
	}{
		{"header address", "\x00\x83\xa2ID\xc4\x02n3\xa4Addr\xc4\x0e127.0.0.1:5000\xa4Term", "n3"},
		{"prefix of another address", "\xa4Addr\xc4\x0f127.0.0.1:40001\xa4Term", "n2"},
		{"shorter address", "\xa4Addr\xc4\x0e127.0.0.1:4000\xa4Term", "n1"},
		{"first address wins", "127.0.0.1:5000 then servers 127.0.0.1:4000", "n3"},
		{"no address yet", "\x00\x83\xa2ID\xc4\x02n3", ""},
	} {
		if got := nw.identify([]byte(tc.head)); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestPartitionGroups checks which links a partition allows: within a
// group, not across, and unlisted nodes alone.
func TestPartitionGroups(t *testing.T) {
	nw := newNetwork()
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
