package chaos

import (
	"strings"
	"testing"
)

// TestReportWithoutVerdictsFails: a run that stopped before its checks
// (here, nodes killed from outside while the cluster formed) printed
// "PASS seed 205" although it had checked nothing.
func TestReportWithoutVerdictsFails(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verdicts []verdict
		failed   bool
	}{
		{"no checks ran", nil, true},
		{"all passed", []verdict{{name: "replicas converged", ok: true}}, false},
		{"one failed", []verdict{{name: "a", ok: true}, {name: "b"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Report{Seed: 205, Verdicts: tc.verdicts}
			if got := r.Failed(); got != tc.failed {
				t.Fatalf("Failed() = %v, want %v", got, tc.failed)
			}
			if want := map[bool]string{true: "FAIL seed 205", false: "PASS seed 205"}[tc.failed]; !strings.Contains(r.String(), want) {
				t.Fatalf("report does not say %q:\n%s", want, r.String())
			}
		})
	}
}
