#!/usr/bin/env bash
# Starts a local 3-node duckraft cluster on loopback (data in ./duckraft-data)
# and prints how to connect. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DUCKRAFT_TOKEN:=duckraft-local-token}"
export DUCKRAFT_TOKEN
mkdir -p duckraft-data
pids=()
stop() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap stop EXIT INT TERM

start() { # id quack-port raft-port gossip-port [join]
	local args=(--id "$1" --data "duckraft-data/$1" --quack "127.0.0.1:$2" --raft "127.0.0.1:$3"
		--gossip "127.0.0.1:$4" --http "127.0.0.1:$(($2 + 3))" --token "$DUCKRAFT_TOKEN")
	[ -n "${5:-}" ] && args+=(--join "$5")
	bin/duckraftd "${args[@]}" >"duckraft-data/$1.log" 2>&1 &
	pids+=($!)
}
start n1 9494 9495 9496
sleep 1
start n2 9504 9505 9506 127.0.0.1:9496
start n3 9514 9515 9516 127.0.0.1:9496

# Wait until the cluster has three voters.
for _ in $(seq 1 150); do
	if bin/duckraft status --server quack:127.0.0.1:9494 2>/dev/null | grep -c ' voter ' | grep -q 3; then
		break
	fi
	sleep 0.2
done
bin/duckraft status --server quack:127.0.0.1:9494 || { echo "cluster did not form; logs in duckraft-data/*.log"; exit 1; }
cat <<MSG

duckraft: a 3-node cluster is running on loopback (logs in duckraft-data/n*.log).
  token:   $DUCKRAFT_TOKEN
  nodes:   quack:127.0.0.1:9494  quack:127.0.0.1:9504  quack:127.0.0.1:9514
  shell:   DUCKRAFT_TOKEN=$DUCKRAFT_TOKEN bin/duckraft --server quack:127.0.0.1:9504
  status:  DUCKRAFT_TOKEN=$DUCKRAFT_TOKEN bin/duckraft status
  page:    http://127.0.0.1:9497/?token=$DUCKRAFT_TOKEN   (also :9507, :9517; docs/operations.md)
  DuckDB:  CREATE SECRET (TYPE quack, TOKEN '$DUCKRAFT_TOKEN'); ATTACH 'quack:localhost' AS remote;
Ctrl-C stops the cluster.
MSG
wait
