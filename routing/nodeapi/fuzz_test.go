package nodeapi

import (
	"net/http"
	"testing"

	"github.com/duckraft/duckraft/node/client"
)

// FuzzHeaders checks that the two headers a node reads from its peers
// never panic, and that what they accept writes back to the same value.
func FuzzHeaders(f *testing.F) {
	for _, s := range []string{"strong", "after 0", "after 18446744073709551615", "at 7", "pinned 42",
		"not_leader", "at", "after -1", " ", "behind 1 2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if r, ok, err := ReadFrom(http.Header{ReadHeader: {v}}); ok {
			if err != nil {
				t.Fatalf("%q: accepted with an error", v)
			}
			again, ok, err := ReadFrom(r.Header())
			if !ok || err != nil || again != r {
				t.Fatalf("%q: %+v came back as %+v (%v, %v)", v, r, again, ok, err)
			}
		}
		if e, ok := AsError(&client.ServerError{Message: "m", Code: v}); ok {
			if again, ok := parseError(e.ErrorCode(), "m"); !ok || *again != *e {
				t.Fatalf("%q: %+v came back as %+v", v, e, again)
			}
		}
	})
}
