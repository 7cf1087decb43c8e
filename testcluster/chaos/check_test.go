package chaos

import (
	"math"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func write(client, key int, v int64, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: regInput{Key: key, Write: true, Value: v}, Call: call, Return: ret, Output: regOutput{}}
}

func unknownWrite(client, key int, v int64, call int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: regInput{Key: key, Write: true, Value: v}, Call: call,
		Return: math.MaxInt64, Output: regOutput{Unknown: true}}
}

func read(client, key int, v int64, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: regInput{Key: key}, Call: call, Return: ret, Output: regOutput{Value: v}}
}

// TestRegisterModel checks the model on small histories whose verdict is
// known, including writes with unknown outcome.
func TestRegisterModel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history []porcupine.Operation
		ok      bool
	}{
		{"initial zero", []porcupine.Operation{read(1, 0, 0, 0, 1)}, true},
		{"read after write", []porcupine.Operation{write(1, 0, 5, 0, 1), read(2, 0, 5, 2, 3)}, true},
		{"stale read after acknowledged write", []porcupine.Operation{write(1, 0, 5, 0, 1), read(2, 0, 0, 2, 3)}, false},
		{"concurrent read sees either", []porcupine.Operation{write(1, 0, 5, 0, 10), read(2, 0, 0, 2, 3), read(3, 0, 5, 4, 5)}, true},
		{"read goes back in time", []porcupine.Operation{write(1, 0, 5, 0, 10), read(2, 0, 5, 2, 3), read(3, 0, 0, 4, 5)}, false},
		{"unknown write may have happened", []porcupine.Operation{unknownWrite(1, 0, 7, 0), read(2, 0, 7, 5, 6)}, true},
		{"unknown write may not have happened", []porcupine.Operation{unknownWrite(1, 0, 7, 0), read(2, 0, 0, 5, 6)}, true},
		{"unknown write cannot be undone", []porcupine.Operation{unknownWrite(1, 0, 7, 0), read(2, 0, 7, 5, 6), read(2, 0, 0, 7, 8)}, false},
		{"keys are independent", []porcupine.Operation{write(1, 0, 5, 0, 1), read(2, 1, 0, 2, 3)}, true},
		{"value nobody wrote", []porcupine.Operation{read(1, 0, 9, 0, 1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := porcupine.CheckOperationsTimeout(registerModel, tc.history, 10*time.Second)
			if (got == porcupine.Ok) != tc.ok {
				t.Fatalf("got %s, want ok=%v", got, tc.ok)
			}
		})
	}
}

// TestCheckAppends checks the appends verdict on what a node might hold.
func TestCheckAppends(t *testing.T) {
	clients := map[int64]appendState{1: appendAcked, 2: appendAcked, 3: appendUnknown, 4: appendUnknown}
	for _, tc := range []struct {
		name      string
		held      appendCounts
		ok        bool
		lost, dup int
	}{
		{"all acknowledged, unknown either way", appendCounts{1: 1, 2: 1, 3: 1}, true, 0, 0},
		{"acknowledged lost", appendCounts{1: 1}, false, 1, 0},
		{"acknowledged twice", appendCounts{1: 2, 2: 1}, false, 0, 1},
		{"unknown twice", appendCounts{1: 1, 2: 1, 4: 2}, false, 0, 1},
		{"never written", appendCounts{1: 1, 2: 1, 99: 1}, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := checkAppends("n1", clients, tc.held)
			if v.ok != tc.ok || v.lost != tc.lost || v.dup != tc.dup {
				t.Fatalf("got ok=%v lost=%d dup=%d (%s), want ok=%v lost=%d dup=%d", v.ok, v.lost, v.dup, v.detail, tc.ok, tc.lost, tc.dup)
			}
		})
	}
}

// TestPlanIsSeeded checks that a seed alone decides the schedule and that
// it fits the duration.
func TestPlanIsSeeded(t *testing.T) {
	a, b := plan(42, time.Minute), plan(42, time.Minute)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("plans of one seed differ in length: %d and %d", len(a), len(b))
	}
	var total time.Duration
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("step %d differs: %v and %v", i, a[i], b[i])
		}
		total += a[i].Hold + a[i].Calm
	}
	if total > time.Minute {
		t.Fatalf("plan lasts %v, longer than the minute asked for", total)
	}
	if c := plan(43, time.Minute); len(c) == len(a) && c[0] == a[0] && c[1] == a[1] {
		t.Fatal("seeds 42 and 43 plan the same first steps")
	}
}

// TestPercentile checks nearest-rank percentiles.
func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 3}, {99, 5}, {100, 5}, {1, 1}} {
		if got := percentile(ds, tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
}
