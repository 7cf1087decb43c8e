#!/usr/bin/env bash
# Installs the Versity S3 Gateway, the S3-compatible server that the S3
# tests start (cmd/internal/s3backup/s3test), with go install, unless it
# is on PATH or in GOBIN already. On a machine with an empty build cache
# that takes minutes of CPU, so make test runs this with --background
# before its tests: the install then runs detached, at low priority, while
# the other tests run. It holds a lock (GOBIN/.versitygw.lock) until it
# ends; s3test waits on that lock instead of starting a second build, and
# installs the gateway itself only when no binary came of it.
# --installed exits 0 when the gateway is installed, 1 when it is not.
set -euo pipefail
# The release s3test.Module names (TestInstallScriptMatches checks).
module=github.com/versity/versitygw/cmd/versitygw@v1.8.0

gobin=$(go env GOBIN)
if [ -z "$gobin" ]; then
	gobin="$(go env GOPATH | cut -d: -f1)/bin"
fi
if command -v versitygw >/dev/null 2>&1 || [ -x "$gobin/versitygw" ]; then
	exit 0
fi
if [ "${1:-}" = --installed ]; then
	exit 1 # (--installed: only tell whether it is installed)
fi
mkdir -p "$gobin"
lock="$gobin/.versitygw.lock"
if [ "${1:-}" != --locked ]; then
	# (--locked: descriptor 9 is the parent's, lock held; opening the file
	# again would drop it.)
	exec 9>"$lock"
fi
if [ "${1:-}" = --background ]; then
	if ! flock -n 9; then
		exit 0 # an install is running already
	fi
	log="${TMPDIR:-/tmp}/duckraft-versitygw-install.log"
	echo "versitygw is missing: installing it in the background ($module, log in $log); make test runs the S3 tests once it has ended"
	# The child inherits descriptor 9 and with it the lock, held until the
	# install ends.
	setsid nohup nice -n 19 "$0" --locked >"$log" 2>&1 </dev/null &
	exit 0
fi
if [ "${1:-}" != --locked ]; then
	flock 9
fi
if [ -x "$gobin/versitygw" ]; then
	exit 0
fi
start=$(date +%s)
GOBIN="$gobin" timeout 40m go install "$module"
echo "installed $gobin/versitygw in $(($(date +%s) - start)) s"
