//go:build unix

package classify

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/sqltext"
)

// benchDashboard is a dashboard-sized query; %d makes each text new.
const benchDashboard = `SELECT date_trunc('hour', ts) AS h, region, count(*) AS n, sum(amount) AS total,
	avg(latency_ms) AS lat, approx_quantile(latency_ms, 0.99) AS p99
FROM events e JOIN regions r ON e.region_id = r.id
WHERE ts >= now() - INTERVAL 1 DAY AND status IN ('ok', 'retry') AND NOT deleted AND tenant = %d
GROUP BY ALL ORDER BY h DESC, total DESC LIMIT 100`

// benchSeq numbers the texts of uncached runs, so that no run meets a text
// an earlier one cached.
var benchSeq atomic.Int64

// BenchmarkClassify measures Statements per statement. Texts marked
// uncached differ in a literal on every call, so each one is parsed;
// cpu-us/op is the process's CPU time per call, which a loaded machine
// inflates less than ns/op.
func BenchmarkClassify(b *testing.B) {
	sqlParser()
	var big strings.Builder
	big.WriteString("INSERT INTO t VALUES ")
	for i := 0; big.Len() < 1<<20; i++ {
		fmt.Fprintf(&big, "(%d, 'row %d'), ", i, i)
	}
	bigInsert := strings.TrimSuffix(big.String(), ", ") + " -- %d"
	for _, bc := range []struct {
		name  string
		sql   string
		lexer bool // the lexer alone, as before DuckDB's parser
	}{
		{"plain_read", "SELECT a, b FROM t WHERE id = %d", false},
		{"plain_read/lexer", "SELECT a, b FROM t WHERE id = %d", true},
		{"point_call/uncached", "SELECT a, lower(b) FROM t WHERE id = %d", false},
		{"point_call/lexer", "SELECT a, lower(b) FROM t WHERE id = %d", true},
		{"dashboard/uncached", benchDashboard, false},
		{"dashboard/cached", strings.Replace(benchDashboard, "%d", "7", 1), false},
		{"dashboard/lexer", benchDashboard, true},
		{"nextval/uncached", "SELECT nextval('s'), %d", false},
		{"insert/uncached", "INSERT INTO t VALUES (%d, 'x')", false},
		{"insert/lexer", "INSERT INTO t VALUES (%d, 'x')", true},
		{"multi3/uncached", "BEGIN; INSERT INTO t VALUES (%d, 'x'); COMMIT", false},
		{"insert_1MB/uncached", bigInsert, false},
		{"insert_1MB/lexer", bigInsert, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sql := bc.sql
			if strings.Contains(sql, "%d") {
				sql = fmt.Sprintf(sql, 0)
			}
			stmts, err := Statements(sql)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(sql)))
			cpu := cpuTime()
			for b.Loop() {
				if strings.Contains(bc.sql, "%d") {
					sql = fmt.Sprintf(bc.sql, benchSeq.Add(1))
				}
				if bc.lexer {
					stmts, err := sqltext.Split(sql)
					if err == nil {
						_, err = classifyTexts(nil, sql, stmts)
					}
					if err != nil {
						b.Fatal(err)
					}
				} else if _, err := Statements(sql); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Microsecond)/float64(b.N)/float64(len(stmts)), "cpu-us/stmt")
		})
	}
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
