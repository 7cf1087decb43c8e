package routing

import (
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/sqltext"
)

func TestTimeoutSetting(t *testing.T) {
	cases := []struct {
		sql  string
		ok   bool
		want time.Duration
		bad  bool
	}{
		{"SET duckraft_statement_timeout = '5s'", true, 5 * time.Second, false},
		{"SET SESSION duckraft_statement_timeout TO '1m30s';", true, 90 * time.Second, false},
		{"set duckraft_statement_timeout = '500ms'", true, 500 * time.Millisecond, false},
		{"SET duckraft_statement_timeout = 30", true, 30 * time.Second, false},
		{"SET duckraft_statement_timeout = '0'", true, 0, false},
		{"SET duckraft_statement_timeout = '-1s'", true, 0, true},
		{"SET duckraft_statement_timeout = 'soon'", true, 0, true},
		{"SET duckraft_statement_timeout = '8760h'", true, 0, true},
		{"SET duckraft_statement_timeout = 99999999999", true, 0, true},
		{"SET duckraft_split_scan = 3", false, 0, false},
	}
	for _, tc := range cases {
		d, ok, err := timeoutSetting(sqltext.Parse(tc.sql))
		if ok != tc.ok || (err != nil) != tc.bad || !tc.bad && d != tc.want {
			t.Errorf("%s: got %v, %v, %v", tc.sql, d, ok, err)
		}
	}
}
