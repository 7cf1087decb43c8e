# duckraft: a replicated cluster of Quack (DuckDB) nodes.
GO      ?= go
BIN     := bin
TAGS    := duckdb_arrow
PKGS    := ./...
# Packages with concurrency that must stay clean under the race detector.
# make test runs their tests once, under it; the other packages (commands,
# system tests of duckraftd processes) run without it.
RACE_PKGS  := ./node/... ./wal/... ./replication/... ./cluster/... ./routing/... ./internal/...
OTHER_PKGS  = $(filter-out $(shell $(GO) list -tags $(TAGS) $(RACE_PKGS)),$(shell $(GO) list -tags $(TAGS) $(PKGS)))
# VERSION is what the binaries say they are (--version, status, the
# duckraft_build_info metric): the commit, marked when the tree had changes.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo devel)
LDFLAGS := -X github.com/duckraft/duckraft/internal/buildinfo.stamped=$(VERSION)

.PHONY: all build run test test-long race vet fuzz fuzz-sql bench chaos ducklake upgrade-test clean s3-gateway

all: build

build:
	$(GO) build -tags $(TAGS) -ldflags '$(LDFLAGS)' -o $(BIN)/duckraftd ./cmd/duckraftd
	$(GO) build -tags $(TAGS) -ldflags '$(LDFLAGS)' -o $(BIN)/duckraft ./cmd/duckraft
	$(GO) build -tags $(TAGS) -ldflags '$(LDFLAGS)' -o $(BIN)/duckraft-bench ./cmd/duckraft-bench

# run starts a local node on loopback and prints how to connect.
run: build
	./scripts/run-local.sh

# System tests start real duckraftd processes: the one just built. Packages
# run one at a time (-p 1) so that clusters under test do not starve each
# other of the machine's two cores: Raft timeouts are real.
export DUCKRAFTD := $(CURDIR)/$(BIN)/duckraftd

# test runs its two passes at once: the system tests spend most of their
# time waiting on elections, timeouts and processes, not on the CPU, which
# the other pass (go vet, then the race tests one package at a time) uses
# meanwhile. The system pass prints as it goes; the other pass's output is
# kept in RACE_LOG and printed whole after both end, so that the two never
# interleave. Each pass's exit status is printed, and test fails if either
# failed. When the S3 tests' gateway was missing at the start (a fresh
# machine: s3-gateway installs it in the background, minutes of CPU), the
# passes skip the S3 tests while that install runs, and S3_PKGS run again
# after them, waiting for the install to end.
RACE_LOG ?= $(BIN)/test-race.log
S3_PKGS  := ./cmd/duckraft ./cmd/duckraftd/daemon ./cmd/internal/s3backup/...
test: build s3-gateway
	@mkdir -p $(dir $(RACE_LOG)); \
	s3later=; ./scripts/install-versitygw.sh --installed || s3later=1; \
	export DUCKRAFT_S3_AFTER_PASSES=$$s3later; \
	{ $(GO) vet -tags $(TAGS) $(PKGS); v=$$?; \
	  $(GO) test -tags $(TAGS) -count=1 -p 1 -race -timeout 15m $(RACE_PKGS); r=$$?; \
	  [ $$v -eq 0 ] && [ $$r -eq 0 ]; } >$(RACE_LOG) 2>&1 & race=$$!; \
	trap 'kill $$race 2>/dev/null' INT TERM; \
	echo "vet and the race pass ($(RACE_PKGS)) run beside the system pass; their output: $(RACE_LOG)"; \
	$(GO) test -tags $(TAGS) -count=1 -p 1 -timeout 15m $(OTHER_PKGS); system=$$?; \
	wait $$race; racerc=$$?; \
	echo "=== vet and the race pass ($(RACE_PKGS)), from $(RACE_LOG):"; cat $(RACE_LOG); \
	echo "=== system pass: exit $$system; vet and race pass: exit $$racerc"; \
	s3rc=0; if [ -n "$$s3later" ]; then \
	  echo "=== the S3 tests' packages again, once the versitygw install has ended ($(S3_PKGS))"; \
	  DUCKRAFT_S3_AFTER_PASSES= $(GO) test -tags $(TAGS) -count=1 -p 1 -timeout 45m $(S3_PKGS); s3rc=$$?; \
	  echo "=== S3 packages: exit $$s3rc"; \
	fi; \
	[ $$system -eq 0 ] && [ $$racerc -eq 0 ] && [ $$s3rc -eq 0 ]

# s3-gateway starts installing the S3 server of the S3 tests (versitygw)
# in the background when it is missing, after build so that it reuses the
# standard library just compiled: a machine with an empty build cache then
# builds it while the tests run, and the S3 tests wait for
# it (scripts/install-versitygw.sh, cmd/internal/s3backup/s3test).
s3-gateway:
	@./scripts/install-versitygw.sh --background

# test-long runs every package without the race detector, with the tests
# that make test runs at a smaller size at their full size
# (DUCKRAFT_LONG=1): the replica's catch-up after 2000 entries.
test-long: build
	DUCKRAFT_LONG=1 $(GO) test -tags $(TAGS) -count=1 -p 1 -timeout 60m $(PKGS)

vet:
	$(GO) vet -tags $(TAGS) $(PKGS)

# fuzz runs every fuzz target of every decoder (and of the engine's append
# checks and the SQL lexer) for FUZZTIME each.
FUZZTIME ?= 30s
FUZZ_PKGS := ./node/wire ./node/engine ./node/sqltext ./wal ./cluster ./routing/nodeapi ./routing/classify ./replication
fuzz:
	@for p in $(FUZZ_PKGS); do \
		for f in $$($(GO) test -list '^Fuzz' $$p | grep ^Fuzz); do \
			echo "fuzz $$p $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 3s $$p || exit 1; \
		done; \
	done

# bench runs every benchmark of bin/duckraft-bench side by side with its
# peers (PostgreSQL with a synchronous standby, started by
# scripts/bench-peers.sh, and a 3-node dqlite cluster for bench writes,
# started by scripts/bench-dqlite.sh, both installed from Debian when
# missing; in-process DuckDB; duckraft with 1 and 3 nodes, and for bench
# writes also 3 nodes with the leader pinned alone to one CPU) and
# regenerates docs/benchmarks.md's generated section and
# docs/img/bench-*.png (about 14 minutes). Each
# benchmark's length is a variable; FAILOVER_VIA (nginx or haproxy) is the
# balancer of the one-endpoint failover, FAILOVER_LB_KILLS its kills of
# each kind (about 20 s each).
WRITES_DURATION   ?= 10s
WRITES_CLIENTS    ?= 1,8,64
BULK_ROWS         ?= 2000000
BULK_RUNS         ?= 3
FAILOVER_DURATION ?= 20s
FAILOVER_VIA      ?= nginx
FAILOVER_LB_KILLS ?= 1
LAG_DURATION      ?= 15s
READS_DURATION    ?= 10s
INGEST_ROWS       ?= 1000000
INGEST_RUNS       ?= 1
CAP_RATE          ?= 50MB/s
CAP_ROWS          ?= 1000000
CAP_SCANS         ?= 5
bench: build
	BIN=$(BIN) WRITES_DURATION=$(WRITES_DURATION) WRITES_CLIENTS=$(WRITES_CLIENTS) BULK_ROWS=$(BULK_ROWS) \
		BULK_RUNS=$(BULK_RUNS) FAILOVER_DURATION=$(FAILOVER_DURATION) FAILOVER_VIA=$(FAILOVER_VIA) \
		FAILOVER_LB_KILLS=$(FAILOVER_LB_KILLS) LAG_DURATION=$(LAG_DURATION) \
		READS_DURATION=$(READS_DURATION) INGEST_ROWS=$(INGEST_ROWS) INGEST_RUNS=$(INGEST_RUNS) \
		CAP_RATE=$(CAP_RATE) CAP_ROWS=$(CAP_ROWS) CAP_SCANS=$(CAP_SCANS) ./scripts/bench.sh

# chaos runs the workloads under a seeded, randomized schedule of kills,
# restarts, pauses, partitions, blackholes and leadership transfers, and
# prints a report (docs/reliability.md). SEED may list several seeds; a
# failing seed reruns with make chaos SEED=…. VOTERS sizes the cluster;
# LOG_STORE picks the nodes' --raft-log-store (boltdb or wal; empty: the
# default).
SEED      ?= $(shell date +%s)
DURATION  ?= 2m
VOTERS    ?= 3
LOG_STORE ?=
# upgrade-test upgrades a running 3-node cluster of the build at OLD (default:
# the last release on DuckDB 1.5.6, built in a throwaway worktree) to this
# one, node by node under writes (docs/upgrade.md).
upgrade-test: build
	./scripts/upgrade-test.sh

chaos: build
	@for s in $(SEED); do \
		$(GO) test -tags $(TAGS) ./testcluster/chaos -run '^TestChaos$$' -count=1 -timeout 30m -v \
			-args -seed=$$s -duration=$(DURATION) -voters=$(VOTERS) -raft-log-store=$(LOG_STORE) || exit 1; \
	done

# ducklake is the long DuckLake run (testcluster/ducklake, docs/ducklake.md):
# DUCKLAKE_COMMITTERS clients commit to a DuckLake catalog on a 3-node
# cluster, DUCKLAKE_READERS read it at past snapshots, and the leader is
# SIGKILLed every DUCKLAKE_KILL_EVERY (0: never), until DUCKLAKE_COMMITS
# commits were acknowledged or DUCKLAKE_DURATION has passed; then the
# checkers judge the catalog.
DUCKLAKE_DURATION   ?= 4h
DUCKLAKE_COMMITS    ?= 10000
DUCKLAKE_COMMITTERS ?= 4
DUCKLAKE_READERS    ?= 2
DUCKLAKE_KILL_EVERY ?= 20s
ducklake: build
	$(GO) test -tags $(TAGS) ./testcluster/ducklake -run '^TestDuckLakeLong$$' -count=1 -timeout 0 -v \
		-args -ducklake.duration=$(DUCKLAKE_DURATION) -ducklake.commits=$(DUCKLAKE_COMMITS) \
		-ducklake.committers=$(DUCKLAKE_COMMITTERS) -ducklake.readers=$(DUCKLAKE_READERS) \
		-ducklake.kill-every=$(DUCKLAKE_KILL_EVERY)

# fuzz-sql is the divergence hunter (testcluster/hunter): writes generated
# from DuckDB's function list, sent to a 3-node cluster, the state hashes
# compared after each. The run ends at ACCEPTED accepted statements, or at
# STATEMENTS sent or after HUNT_DURATION when those are set (0: no bound);
# a finding reruns with make fuzz-sql SEED=…. KEEP_GOING=1
# carries on after a divergence to find more classes in one run; SKIP
# leaves out placements (comma-separated) to hunt past a known finding.
ACCEPTED      ?= 10000
STATEMENTS    ?= 0
HUNT_DURATION ?= 0
KEEP_GOING    ?= 0
RESTORE_EVERY ?= 1000
SKIP          ?=
fuzz-sql: build
	@for s in $(SEED); do \
		$(GO) test -tags $(TAGS) ./testcluster/hunter -run '^TestHunt$$' -count=1 -timeout 3h -v \
			-args -seed=$$s -accepted=$(ACCEPTED) -statements=$(STATEMENTS) -duration=$(HUNT_DURATION) \
			-restore-every=$(RESTORE_EVERY) -skip='$(SKIP)' \
			-keep-going=$$( [ "$(KEEP_GOING)" = 1 ] && echo true || echo false ) || exit 1; \
	done

clean:
	rm -rf $(BIN)
