#!/usr/bin/env bash
# Builds duckraftd at OLD (default: the last release on DuckDB 1.5.6) in a
# throwaway git worktree and runs testcluster's TestRollingUpgrade and
# TestSnapshotAcrossVersions from it to the binary just built (bin/duckraftd).
set -euo pipefail
cd "$(dirname "$0")/.."
old=${OLD:-3b2f75c}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add --detach "$tmp/src" "$old" >/dev/null
echo "building duckraftd at $old"
(cd "$tmp/src" && go build -tags duckdb_arrow -o "$tmp/duckraftd-old" ./cmd/duckraftd)
DUCKRAFTD="$PWD/bin/duckraftd" DUCKRAFTD_OLD="$tmp/duckraftd-old" \
	go test -tags duckdb_arrow -count=1 -timeout 15m -run '^(TestRollingUpgrade|TestSnapshotAcrossVersions)$' -v ./testcluster
