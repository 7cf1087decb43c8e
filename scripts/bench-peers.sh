#!/usr/bin/env bash
# bench-peers.sh start DIR | stop DIR: the PostgreSQL peer of make bench.
#
# start installs PostgreSQL from Debian when it is missing, then runs, as a
# user other than root, a primary and a synchronous standby (pg_basebackup,
# synchronous_standby_names) on free loopback ports with their data, sockets
# and logs under DIR, password authentication only, and prints the
# primary's connection string for duckraft-bench --pg. stop ends both and
# removes DIR.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
	echo "usage: $0 start|stop DIR" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)

pgbin() {
	local v
	v=$(ls /usr/lib/postgresql 2>/dev/null | sort -n | tail -1)
	[ -n "$v" ] && [ -x "/usr/lib/postgresql/$v/bin/pg_ctl" ] || return 1
	echo "/usr/lib/postgresql/$v/bin"
}

# as_pg runs a command as the user that owns the clusters: PostgreSQL
# refuses to run as root.
as_pg() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# shellcheck source=free-port.sh
. "$here/free-port.sh"

case "$cmd" in
start)
	if ! pgbin >/dev/null; then
		"$here/ensure-deb.sh" postgresql >&2
	fi
	bin=$(pgbin) || { echo "bench-peers: PostgreSQL is not installed" >&2; exit 1; }
	if [ -e "$dir" ]; then
		echo "bench-peers: $dir exists: stop it first ($0 stop $dir)" >&2
		exit 1
	fi
	mkdir -p "$dir"
	pass=$(head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n')
	primary=$(free_port)
	standby=$(free_port)
	while [ "$standby" = "$primary" ]; do standby=$(free_port); done
	printf '%s\n' "$pass" >"$dir/pwfile"
	chmod 600 "$dir/pwfile"
	[ "$(id -u)" = 0 ] && chown -R postgres "$dir"
	as_pg "$bin/initdb" -D "$dir/primary" -U bench --pwfile="$dir/pwfile" --auth=scram-sha-256 -E UTF8 >"$dir/initdb.log" 2>&1
	cat >>"$dir/primary/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $primary
unix_socket_directories = '$dir'
max_connections = 200
wal_level = replica
max_wal_senders = 4
fsync = on
synchronous_commit = on
synchronous_standby_names = 'standby1'
EOF
	as_pg "$bin/pg_ctl" -D "$dir/primary" -l "$dir/primary.log" -w -t 60 start >/dev/null
	as_pg env PGPASSWORD="$pass" "$bin/pg_basebackup" -h 127.0.0.1 -p "$primary" -U bench \
		-D "$dir/standby" -X stream -c fast >"$dir/basebackup.log" 2>&1
	cat >>"$dir/standby/postgresql.auto.conf" <<EOF
port = $standby
primary_conninfo = 'host=127.0.0.1 port=$primary user=bench password=$pass application_name=standby1'
EOF
	as_pg touch "$dir/standby/standby.signal"
	as_pg "$bin/pg_ctl" -D "$dir/standby" -l "$dir/standby.log" -w -t 60 start >/dev/null
	# Commits wait for the standby only once it streams as synchronous.
	for _ in $(seq 1 120); do
		state=$(as_pg env PGPASSWORD="$pass" "$bin/psql" -h 127.0.0.1 -p "$primary" -U bench -d postgres -Atc \
			"SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'" 2>/dev/null || true)
		if [ "$state" = sync ]; then
			echo "postgres://bench:$pass@127.0.0.1:$primary/postgres?sslmode=disable"
			exit 0
		fi
		sleep 0.5
	done
	echo "bench-peers: the standby did not become synchronous (logs in $dir)" >&2
	exit 1
	;;
stop)
	bin=$(pgbin) || exit 0
	for c in standby primary; do
		if [ -f "$dir/$c/postmaster.pid" ]; then
			as_pg "$bin/pg_ctl" -D "$dir/$c" -m fast -w stop >/dev/null || true
		fi
	done
	rm -rf "$dir"
	;;
*)
	echo "usage: $0 start|stop DIR" >&2
	exit 2
	;;
esac
