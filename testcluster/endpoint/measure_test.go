package endpoint

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/client"
)

func TestGap(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name      string
		successes []time.Time
		kill      time.Time
		want      time.Duration
		ok        bool
	}{
		{"both sides", []time.Time{at(0), at(10), at(1500), at(1510)}, at(20), 1490 * time.Millisecond, true},
		{"nothing before", []time.Time{at(30), at(40)}, at(20), 0, false},
		{"nothing after", []time.Time{at(0), at(10)}, at(20), 0, false},
		{"none", nil, at(20), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Gap(tc.successes, tc.kill)
			if got != tc.want || ok != tc.ok {
				t.Errorf("Gap = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 0.5, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.5, 3 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.99, 4 * time.Millisecond},
		{ms(1, 2, 3, 4), 1, 4 * time.Millisecond},
	} {
		if got := Percentile(tc.sorted, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", tc.sorted, tc.p, got, tc.want)
		}
	}
}

func TestFailureKey(t *testing.T) {
	for _, tc := range []struct {
		err   error
		key   string
		ended bool
	}{
		{&client.ServerError{Code: "request_lost", Message: "Connection Error: node n1 failed"}, "request_lost", false},
		{&client.ServerError{Code: "session_lost", Message: "Connection Error: session lost"}, "session_lost", true},
		{fmt.Errorf("exec: %w", &client.ServerError{Code: "unknown_session", Message: "Invalid connection id"}), "unknown_session", true},
		{&client.ServerError{Message: "Catalog Error: Table with name x does not exist!"}, "no code: Catalog Error", false},
		{errors.New(`Post "https://127.0.0.1:1/quack": EOF`), "transport: EOF", false},
	} {
		if got := FailureKey(tc.err); got != tc.key {
			t.Errorf("FailureKey(%v) = %q, want %q", tc.err, got, tc.key)
		}
		if got := SessionEnded(tc.err); got != tc.ended {
			t.Errorf("SessionEnded(%v) = %v, want %v", tc.err, got, tc.ended)
		}
	}
}
