package hostlog

import (
	"fmt"
	"testing"
	"time"
)

// TestAllowOncePerHost: one line per host per interval, the held-back ones
// counted on the next line let through.
func TestAllowOncePerHost(t *testing.T) {
	th := New(time.Hour)
	if _, ok := th.Allow("10.0.0.1"); !ok {
		t.Fatal("the first line was held back")
	}
	for range 99 {
		if _, ok := th.Allow("10.0.0.1"); ok {
			t.Fatal("a second line within the interval was let through")
		}
	}
	if _, ok := th.Allow("10.0.0.2"); !ok {
		t.Fatal("another host's first line was held back")
	}
	th.seen["10.0.0.1"].logged = time.Now().Add(-2 * time.Hour)
	if n, ok := th.Allow("10.0.0.1"); !ok || n != 99 {
		t.Fatalf("after the interval: %d held back, let through %v; want 99, true", n, ok)
	}
}

// TestAllowManyHosts: past MaxHosts recent hosts, the others share one
// entry, so a client with many addresses cannot flood the log either.
func TestAllowManyHosts(t *testing.T) {
	th := New(time.Hour)
	logged := 0
	for i := range MaxHosts + 100 {
		if _, ok := th.Allow(fmt.Sprintf("host-%d", i)); ok {
			logged++
		}
	}
	if logged != MaxHosts+1 || len(th.seen) != MaxHosts+1 {
		t.Fatalf("%d lines for %d hosts, %d entries; want %d and %d", logged, MaxHosts+100, len(th.seen), MaxHosts+1, MaxHosts+1)
	}
}
