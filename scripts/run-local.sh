#!/usr/bin/env bash
# Starts a local 3-node duckraft cluster on loopback (data in ./duckraft-data)
# and prints how to connect. Ctrl-C stops it. n1 bootstraps the cluster and
# generates its key in duckraft-data/n1/cluster.key (mode 0600); n2 and n3
# are given that file: the token, which clients hold, makes nobody a member.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p duckraft-data
# The client token: DUCKRAFT_TOKEN if set, else the one generated at the
# first make run and kept in duckraft-data/token (mode 0600). It reaches
# the nodes through the environment, not --token, which ps would show, and
# is printed nowhere: the instructions below read the file.
tokenfile=duckraft-data/token
if [ -z "${DUCKRAFT_TOKEN:-}" ]; then
	if [ ! -s "$tokenfile" ]; then
		(umask 077 && head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$tokenfile")
	fi
	DUCKRAFT_TOKEN=$(cat "$tokenfile")
	tokenhint="DUCKRAFT_TOKEN=\$(cat $tokenfile)"
else
	tokenhint="DUCKRAFT_TOKEN=<the token you set>"
fi
export DUCKRAFT_TOKEN
# One make run at a time: a second one would fail to bind the ports and
# must not touch the running cluster's files.
pidfile=duckraft-data/run.pid
if [ -s "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
	echo "a cluster started by make run is already running (pid $(cat "$pidfile")): stop it with Ctrl-C there, or kill $(cat "$pidfile")" >&2
	exit 1
fi
for port in 9494 9495 9496 9497 9504 9505 9506 9507 9514 9515 9516 9517; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "port $port on 127.0.0.1 is in use: another duckraftd (or another program) holds it; stop it first" >&2
		exit 1
	fi
done
echo $$ >"$pidfile"
pids=()
stop() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -f "$pidfile"
}
trap stop EXIT INT TERM

key=duckraft-data/n1/cluster.key
start() { # id quack-port raft-port gossip-port [join]
	local args=(--id "$1" --data "duckraft-data/$1" --quack "127.0.0.1:$2" --raft "127.0.0.1:$3"
		--gossip "127.0.0.1:$4" --http "127.0.0.1:$(($2 + 3))")
	[ -n "${5:-}" ] && args+=(--join "$5" --cluster-key-file "$key")
	# Appended to, never truncated: the log of earlier runs stays.
	echo "--- make run $(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"duckraft-data/$1.log"
	bin/duckraftd "${args[@]}" >>"duckraft-data/$1.log" 2>&1 &
	pids+=($!)
}
start n1 9494 9495 9496
# n1 writes its key before it serves.
for _ in $(seq 1 50); do
	[ -s "$key" ] && break
	sleep 0.2
done
[ -s "$key" ] || { echo "n1 did not start (an old duckraft-data? remove it); its log:"; tail -5 duckraft-data/n1.log; exit 1; }
sleep 1
start n2 9504 9505 9506 127.0.0.1:9496
start n3 9514 9515 9516 127.0.0.1:9496

# Wait until the cluster has a leader and three live voters, and every
# node is ready (/readyz: a leader known, applied within the staleness).
formed() {
	local st
	st=$(bin/duckraft status --server quack:127.0.0.1:9494 2>/dev/null) || return 1
	[ "$(grep -cE '^n[0-9]+ +voter +alive ' <<<"$st")" = 3 ] || return 1
	grep -qE '^n[0-9]+ +voter +alive .*\*$' <<<"$st" || return 1
	for port in 9497 9507 9517; do
		(exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET /readyz HTTP/1.0\r\n\r\n' >&3 && grep -q '^ok' <&3) 2>/dev/null || return 1
	done
}
ok=
for _ in $(seq 1 150); do
	if formed; then
		ok=1
		break
	fi
	sleep 0.2
done
bin/duckraft status --server quack:127.0.0.1:9494 || true
[ -n "$ok" ] || { echo "the cluster did not form (no leader, or fewer than three ready voters); logs in duckraft-data/n*.log" >&2; exit 1; }
cat <<MSG

duckraft: a 3-node cluster is running on loopback (logs in duckraft-data/n*.log).
  token:   in $tokenfile (mode 0600); export $tokenhint
  members: the cluster key is in $key (a joining node needs --cluster-key-file with a copy)
  nodes:   quack:127.0.0.1:9494  quack:127.0.0.1:9504  quack:127.0.0.1:9514
  shell:   $tokenhint bin/duckraft --server quack:127.0.0.1:9504
  status:  $tokenhint bin/duckraft status
  page:    http://127.0.0.1:9497/   (also :9507, :9517; it asks for the token; docs/operations.md)
  DuckDB:  CREATE SECRET (TYPE quack, TOKEN '<the token>'); ATTACH 'quack:localhost' AS remote;
Ctrl-C stops the cluster.
MSG
wait
