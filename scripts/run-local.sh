#!/usr/bin/env bash
# Starts a local duckraft node on loopback in ./duckraft-data and prints how
# to connect. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DUCKRAFT_TOKEN:=duckraft-local-token}"
export DUCKRAFT_TOKEN
exec bin/duckraftd --id n1 --data duckraft-data/n1 --quack 127.0.0.1:9494 \
	--raft 127.0.0.1:9495 --gossip 127.0.0.1:9496 --token "$DUCKRAFT_TOKEN"
