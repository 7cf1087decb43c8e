package hunter

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Kind is the kind of a finding.
type Kind string

// Kinds of findings.
const (
	// Divergence: nodes at one applied index hold different data.
	Divergence Kind = "divergence"
	// Crash: a node exited.
	Crash Kind = "crash"
	// Hang: a statement got no answer.
	Hang Kind = "hang"
	// Stuck: a node did not reach the leader's applied index (a halted FSM
	// looks like this).
	Stuck Kind = "stuck"
)

// Finding is one thing the hunt found, with the statements sent before
// it, the last one first to blame.
type Finding struct {
	Kind       Kind
	Detail     string
	Statements []Sent
}

// Report is what a hunt saw.
type Report struct {
	Seed      int64
	Functions int
	Sent      int
	Accepted  int
	// Refused counts refusals by reason: the error with names, literals
	// and numbers taken out.
	Refused map[string]int
	// Placements counts statements per placement: sent and accepted.
	Placements map[string]*[2]int
	Findings   []Finding
	Restores   int
	Resets     int
	Elapsed    time.Duration
	// ExecTime is the time statements took to answer, CheckTime the time
	// spent waiting for the nodes and comparing their hashes.
	ExecTime, CheckTime time.Duration
	// Trims are the tables the guard cut back to maxRows (guard.go).
	Trims []Trim
}

func newReport(seed int64) *Report {
	return &Report{Seed: seed, Refused: map[string]int{}, Placements: map[string]*[2]int{}}
}

func (r *Report) count(s Sent) {
	r.Sent++
	p := r.Placements[s.Placement]
	if p == nil {
		p = new([2]int)
		r.Placements[s.Placement] = p
	}
	p[0]++
	if s.Err == "" {
		r.Accepted++
		p[1]++
		return
	}
	r.Refused[Reason(s.Err)]++
}

var (
	quoted  = regexp.MustCompile(`"[^"]*"|'[^']*'`)
	number  = regexp.MustCompile(`\b\d+(\.\d+)?\b`)
	calls   = regexp.MustCompile(`\b[a-zA-Z_][a-zA-Z0-9_.]*\(\)`)
	objName = regexp.MustCompile(`\b(t|c|def|gen|m|tm|v)\d+\b`)
	spaces  = regexp.MustCompile(`\s+`)
	lineCol = regexp.MustCompile(`(?s)\n.*`)
)

// Reason is an error message reduced to its class: its first line without
// quoted names, the hunt's object names, numbers and function names, at
// most 100 characters.
func Reason(msg string) string {
	s := lineCol.ReplaceAllString(msg, "")
	s = quoted.ReplaceAllString(s, "?")
	s = calls.ReplaceAllString(s, "f()")
	s = objName.ReplaceAllString(s, "OBJ")
	s = number.ReplaceAllString(s, "N")
	s = strings.TrimSpace(spaces.ReplaceAllString(s, " "))
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}

// Failed reports whether the hunt found anything.
func (r *Report) Failed() bool { return len(r.Findings) > 0 }

func (r *Report) String() string {
	var b strings.Builder
	rate := 0.0
	if r.Elapsed > 0 {
		rate = float64(r.Sent) / r.Elapsed.Seconds()
	}
	fmt.Fprintf(&b, "divergence hunter, seed %d: %d statements from %d functions in %v (%.1f statements/s)\n",
		r.Seed, r.Sent, r.Functions, r.Elapsed.Round(time.Second), rate)
	fmt.Fprintf(&b, "accepted %d, refused %d, findings %d (divergences %d), follower restores %d, resets %d\n",
		r.Accepted, r.Sent-r.Accepted, len(r.Findings), r.count2(Divergence), r.Restores, r.Resets)
	fmt.Fprintf(&b, "time in statements %v, in checks %v\n", r.ExecTime.Round(time.Second), r.CheckTime.Round(time.Second))
	fmt.Fprintf(&b, "tables cut back to %d rows: %d\n", maxRows, len(r.Trims))
	for _, t := range r.Trims {
		fmt.Fprintf(&b, "  %s\n", t)
	}
	b.WriteString("\nplacement                           sent  accepted\n")
	for _, p := range sortedKeys(r.Placements) {
		fmt.Fprintf(&b, "%-34s %6d %9d\n", p, r.Placements[p][0], r.Placements[p][1])
	}
	b.WriteString("\nrefused, by reason\n")
	reasons := sortedKeys(r.Refused)
	sort.SliceStable(reasons, func(i, j int) bool { return r.Refused[reasons[i]] > r.Refused[reasons[j]] })
	for _, k := range reasons {
		fmt.Fprintf(&b, "%6d  %s\n", r.Refused[k], k)
	}
	for i, f := range r.Findings {
		fmt.Fprintf(&b, "\nFINDING %d (%s, seed %d): %s\n", i+1, f.Kind, r.Seed, f.Detail)
		if n := len(f.Statements); n > 0 {
			fmt.Fprintf(&b, "  statement: %s\n  after (oldest first):\n", f.Statements[n-1])
			for _, s := range f.Statements[:n-1] {
				fmt.Fprintf(&b, "    %s\n", s)
			}
		}
	}
	return b.String()
}

func (r *Report) count2(k Kind) int {
	n := 0
	for _, f := range r.Findings {
		if f.Kind == k {
			n++
		}
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
