#!/usr/bin/env bash
# bench-dqlite.sh start DIR | stop DIR: the dqlite peer of make bench.
#
# start installs Debian's go-dqlite (dqlite-benchmark, with libdqlite0)
# when it is missing and runs a 3-voter dqlite cluster on free loopback
# ports with its data and logs under DIR: two dqlite-benchmark nodes that
# run until stop, and a third, the driver, that duckraft-bench writes
# --dqlite DIR starts for each measured point (it is one process with the
# load it runs) and that start runs once for a second, so that the three
# voters are in place and a dqlite that does not work fails here. DIR/cluster
# names the three addresses, the driver's last. start prints DIR for
# --dqlite; stop ends the two nodes and removes DIR.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
	echo "usage: $0 start|stop DIR" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck source=free-port.sh
. "$here/free-port.sh"

# wait_ready waits for a node to say it has joined (dqlite-benchmark
# prints this once its app is ready) or to die. It returns 75 when the node
# died because another socket took its port first, so start tries others.
wait_ready() {
	local name=$1 pid=$2
	for _ in $(seq 1 240); do
		if grep -q "ready" "$dir/$name.log" 2>/dev/null; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			if grep -q "failed to set bind address" "$dir/$name.log"; then
				return 75
			fi
			echo "bench-dqlite: $name exited: $(cat "$dir/$name.log")" >&2
			return 1
		fi
		sleep 0.25
	done
	echo "bench-dqlite: $name not ready after 60 s: $(tail -5 "$dir/$name.log")" >&2
	return 1
}

stop_nodes() {
	[ -f "$dir/pids" ] || return 0
	local pid
	while read -r pid; do
		kill -TERM "$pid" 2>/dev/null || true
	done <"$dir/pids"
	while read -r pid; do
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	done <"$dir/pids"
}

# start_nodes starts the two long-running nodes on a1 and a2; it returns
# wait_ready's status.
start_nodes() {
	setsid dqlite-benchmark --db "$a1" --dir "$dir/n1" </dev/null >"$dir/n1.log" 2>&1 &
	echo $! >>"$dir/pids"
	wait_ready n1 $! || return
	setsid dqlite-benchmark --db "$a2" --join "$a1" --dir "$dir/n2" </dev/null >"$dir/n2.log" 2>&1 &
	echo $! >>"$dir/pids"
	wait_ready n2 $! || return
}

case "$cmd" in
start)
	if ! command -v dqlite-benchmark >/dev/null; then
		"$here/ensure-deb.sh" go-dqlite >&2
	fi
	if [ -e "$dir" ]; then
		echo "bench-dqlite: $dir exists: stop it first ($0 stop $dir)" >&2
		exit 1
	fi
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	trap 'stop_nodes; rm -rf "$dir"' EXIT
	rc=75
	for attempt in 1 2 3; do
		a1=127.0.0.1:$(free_port)
		a2=127.0.0.1:$(free_port)
		a3=127.0.0.1:$(free_port)
		if [ "$a1" = "$a2" ] || [ "$a2" = "$a3" ] || [ "$a1" = "$a3" ]; then
			continue
		fi
		rc=0
		start_nodes || rc=$?
		if [ "$rc" = 0 ]; then
			break
		fi
		stop_nodes
		rm -rf "${dir:?}"/*
		if [ "$rc" != 75 ]; then
			exit 1
		fi
		echo "bench-dqlite: a port was taken before a node bound it (attempt $attempt); trying others" >&2
	done
	if [ "$rc" != 0 ]; then
		echo "bench-dqlite: no three free ports after 3 attempts" >&2
		exit 1
	fi
	echo "$a1,$a2,$a3" >"$dir/cluster"
	# The driver's first run joins it as the third voter.
	dqlite-benchmark --db "$a3" --join "$a1" --dir "$dir/driver" --driver --cluster "$a1,$a2,$a3" \
		--cluster-timeout 60 --duration 1 --workers 1 >"$dir/driver.log" 2>&1 || {
		echo "bench-dqlite: the first run of the driver failed: $(cat "$dir/driver.log")" >&2
		exit 1
	}
	voters=$(dqlite -s "$a1" benchmark .cluster 2>/dev/null | grep -c '|voter$' || true)
	if [ "$voters" != 3 ]; then
		echo "bench-dqlite: $voters voters after the driver joined, want 3" >&2
		exit 1
	fi
	trap - EXIT
	echo "$dir"
	;;
stop)
	stop_nodes
	rm -rf "$dir"
	;;
*)
	echo "usage: $0 start|stop DIR" >&2
	exit 2
	;;
esac
