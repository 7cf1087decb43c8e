package chaos

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// regInput is one register operation: a write of Value to Key, or a read
// of Key.
type regInput struct {
	Key   int
	Write bool
	Value int64
}

// regOutput is what a read returned; Unknown marks a write whose outcome
// the client could not learn.
type regOutput struct {
	Value   int64
	Unknown bool
}

// registerModel is a map of independent registers, checked key by key.
// Every key starts at 0, as the workload's setup writes it.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[int][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(regInput).Key
			byKey[k] = append(byKey[k], op)
		}
		keys := make([]int, 0, len(byKey))
		for k := range byKey {
			keys = append(keys, k)
		}
		sort.Ints(keys)
		out := make([][]porcupine.Operation, len(keys))
		for i, k := range keys {
			out[i] = byKey[k]
		}
		return out
	},
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.Write {
			return true, in.Value
		}
		return output.(regOutput).Value == state.(int64), state
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(regInput), output.(regOutput)
		switch {
		case !in.Write:
			return fmt.Sprintf("read k%d → %d", in.Key, out.Value)
		case out.Unknown:
			return fmt.Sprintf("write k%d ← %d (outcome unknown)", in.Key, in.Value)
		}
		return fmt.Sprintf("write k%d ← %d", in.Key, in.Value)
	},
}

// linearizable checks history against the register model. On a violation
// it writes porcupine's visualization and a text dump of the history into
// dir and says where.
func linearizable(history []porcupine.Operation, timeout time.Duration, dir string) verdict {
	v := verdict{name: "linearizable strong reads (porcupine)"}
	reads := 0
	for _, op := range history {
		if !op.Input.(regInput).Write {
			reads++
		}
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, history, timeout)
	switch res {
	case porcupine.Ok:
		v.ok, v.detail = true, fmt.Sprintf("%d operations, %d strong reads", len(history), reads)
	case porcupine.Unknown:
		// Not a violation, but not a proof either: say so.
		v.ok, v.detail = true, fmt.Sprintf("UNKNOWN: the checker timed out after %v on %d operations", timeout, len(history))
	default:
		v.detail = fmt.Sprintf("NOT linearizable (%d operations)", len(history))
		if dir != "" {
			if err := dumpHistory(history, info, dir); err != nil {
				v.detail += fmt.Sprintf("; dump failed: %v", err)
			} else {
				v.detail += "; history and visualization in " + dir
			}
		}
	}
	return v
}

// dumpHistory writes the history as text, ordered by call time, and
// porcupine's HTML visualization.
func dumpHistory(history []porcupine.Operation, info porcupine.LinearizationInfo, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dump history: %w", err)
	}
	if err := porcupine.VisualizePath(registerModel, info, filepath.Join(dir, "register.html")); err != nil {
		return fmt.Errorf("visualize: %w", err)
	}
	ops := append([]porcupine.Operation(nil), history...)
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	var b strings.Builder
	for _, op := range ops {
		ret := "open"
		if op.Return != math.MaxInt64 {
			ret = fmt.Sprintf("%.6f", float64(op.Return)/1e9)
		}
		fmt.Fprintf(&b, "%.6f\t%s\tclient %d on %v\t%s\n", float64(op.Call)/1e9, ret, op.ClientId, op.Metadata,
			registerModel.DescribeOperation(op.Input, op.Output))
	}
	return os.WriteFile(filepath.Join(dir, "register.txt"), []byte(b.String()), 0o644)
}

// appendCounts is how often each id appears in the appends table.
type appendCounts map[int64]int

// checkAppends compares what one node holds with what clients know:
// acknowledged ids exactly once, ids whose insert had an unknown outcome at
// most once, and nothing else.
func checkAppends(node string, clients map[int64]appendState, held appendCounts) verdict {
	v := verdict{name: "acknowledged appends on " + node}
	var lost, dup, stray []int64
	acked, unknown, unknownApplied := 0, 0, 0
	for id, s := range clients {
		n := held[id]
		switch {
		case s == appendAcked:
			acked++
			if n == 0 {
				lost = append(lost, id)
			}
		default:
			unknown++
			if n == 1 {
				unknownApplied++
			}
		}
		if n > 1 {
			dup = append(dup, id)
		}
	}
	for id := range held {
		if _, ok := clients[id]; !ok {
			stray = append(stray, id)
		}
	}
	v.lost, v.dup = len(lost), len(dup)
	v.ok = len(lost) == 0 && len(dup) == 0 && len(stray) == 0
	v.detail = fmt.Sprintf("%d acknowledged: %d lost, %d duplicated; %d of %d with unknown outcome applied; %d never written",
		acked, len(lost), len(dup), unknownApplied, unknown, len(stray))
	for _, l := range []struct {
		what string
		ids  []int64
	}{{"lost", lost}, {"duplicated", dup}, {"never written", stray}} {
		if len(l.ids) > 0 {
			sort.Slice(l.ids, func(i, j int) bool { return l.ids[i] < l.ids[j] })
			v.detail += fmt.Sprintf("; %s e.g. %v", l.what, l.ids[:min(len(l.ids), 10)])
		}
	}
	return v
}
