#!/usr/bin/env bash
# bench.sh: make bench. Starts the PostgreSQL peer (bench-peers.sh) and
# the dqlite peer (bench-dqlite.sh), runs every benchmark as JSON side by
# side with them, and regenerates the generated section of
# docs/benchmarks.md and its plots under docs/img.
# Each benchmark's length comes from the environment (Makefile defaults).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-bin}
bench="$bin/duckraft-bench"
daemon="$bin/duckraftd"
out=$(mktemp -d /tmp/duckraft-bench.XXXXXX)
# PostgreSQL runs as another user: its directory must not sit under $out,
# which only root may enter.
pgdir=$(mktemp -u -d /tmp/duckraft-bench-pg.XXXXXX)
dqdir=$(mktemp -u -d /tmp/duckraft-bench-dqlite.XXXXXX)
cleanup() {
	scripts/bench-dqlite.sh stop "$dqdir" || true
	scripts/bench-peers.sh stop "$pgdir" || true
	rm -rf "$out"
}
trap cleanup EXIT

echo "bench: starting PostgreSQL with a synchronous standby" >&2
dsn=$(scripts/bench-peers.sh start "$pgdir")
echo "bench: starting a 3-node dqlite cluster" >&2
dq=$(scripts/bench-dqlite.sh start "$dqdir")

"$bench" writes --duckraftd "$daemon" --pg "$dsn" --dqlite "$dq" --systems "${WRITES_SYSTEMS:-duckraft-3,duckraft-3-pinned,duckraft-1,duckdb}" \
	--clients "${WRITES_CLIENTS:-1,8,64}" --duration "${WRITES_DURATION:-10s}" --json >"$out/writes.json"
# Only bench writes loads dqlite: its idle nodes would only add noise to
# the rest.
scripts/bench-dqlite.sh stop "$dqdir"
"$bench" bulk --duckraftd "$daemon" --pg "$dsn" --systems duckraft-1,duckraft-3,duckdb \
	--rows "${BULK_ROWS:-2000000}" --runs "${BULK_RUNS:-3}" --json >"$out/bulk.json"
"$bench" failover --duckraftd "$daemon" --mode "${FAILOVER_MODE:-kill}" \
	--duration "${FAILOVER_DURATION:-20s}" --at "${FAILOVER_AT:-8s}" --json >"$out/failover.json"
"$bench" failover --duckraftd "$daemon" --via "${FAILOVER_VIA:-nginx}" --kills "${FAILOVER_LB_KILLS:-1}" \
	--json >"$out/failover-lb.json"
"$bench" lag --duckraftd "$daemon" --duration "${LAG_DURATION:-15s}" --json >"$out/lag.json"
"$bench" reads --duckraftd "$daemon" --duration "${READS_DURATION:-10s}" >"$out/reads.md"
"$bench" reads --duckraftd "$daemon" --cap "${CAP_RATE:-50MB/s}" --rows "${CAP_ROWS:-1000000}" \
	--scans "${CAP_SCANS:-5}" >"$out/cap.md"
"$bench" ingest --duckraftd "$daemon" --rows "${INGEST_ROWS:-1000000}" --runs "${INGEST_RUNS:-1}" --json >"$out/ingest.json"

"$bench" report --doc docs/benchmarks.md --img docs/img \
	"$out/writes.json" "$out/bulk.json" "$out/failover.json" "$out/failover-lb.json" "$out/lag.json" "$out/ingest.json" "$out/reads.md" "$out/cap.md"
echo "bench: docs/benchmarks.md and docs/img/bench-*.png regenerated" >&2
