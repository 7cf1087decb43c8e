// Package ducklake is a DuckLake workload harness: Go clients that keep a
// DuckLake catalog in a duckraft cluster by sending what the DuckLake
// extension sends, statement for statement, and checkers that judge what
// the catalog holds afterwards.
//
// It stands in for DuckDB itself. No DuckDB with the ducklake and quack
// extensions can run on the machines this project is built and tested on:
// DuckDB downloads those extensions when they are first loaded, and these
// machines have no access to the extension repository. So the clients here
// are written from the DuckLake source (duckdb/ducklake at 2ed0a0be,
// 2026-08-20; DESIGN.md names the file and function of each statement
// shape) and from the DuckLake specification, and speak Quack with the
// project's own client (node/client) in the generation DuckDB 2.0 speaks
// (Q3). What they cannot show is how the real extension reacts to an
// answer it was not written for; docs/ducklake.md says what that leaves
// untested.
//
// A client attaches (the secrets and information_schema probes, the
// catalog's creation in one text, the probe for a server-side
// ducklake_commit), creates its table, and then commits: Parquet data
// files written by DuckDB in this process into the lake's DATA_PATH (only
// their catalog rows go to the cluster), small inserts inlined into the
// catalog's inlined-data tables, deletes (delete files, and inlined rows
// ended by an UPDATE), compactions that merge files, and
// ducklake_expire_snapshots. Every commit runs DuckLake's client-side
// commit loop: the batch of the new snapshot's rows in one text, COMMIT, and
// on an error that RetryOnError accepts (a primary key, unique, conflict or
// concurrent error) a re-read of the newest snapshot and the changes made
// since, DuckLake's conflict rules, and another try, 10 at most, 100 ms
// apart ×1.5. Readers read tables at past snapshots (AT VERSION) as
// DuckLake does: the catalog at that snapshot, the files and inlined rows
// in force then, the files themselves read by DuckDB here.
//
// Clients send in one of three modes (Mode): without a server transaction,
// as the DuckLake source sends today, or inside BEGIN TRANSACTION … COMMIT,
// as the quack extension is meant to, with the reset after an error sent as
// separate statements or as one text.
//
// Run drives a workload against any catalog server (a Backend: a duckraft
// node over Quack, or a DuckDB database in this process for comparison);
// Check judges it. The tests run it against a 3-node cluster whose leader
// is killed, through a follower and through the leader.
package ducklake
