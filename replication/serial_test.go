package replication

import (
	"testing"

	"github.com/duckraft/duckraft/wal"
)

// TestSerialApplyReadsRows: writes that read rows without SELECT, FROM,
// UPDATE or DELETE in their text (MERGE, INSERT … TABLE u, ALTER TABLE …
// DEFAULT nextval) are applied on one thread too; DDL that only names a
// table and INSERT … VALUES are not.
func TestSerialApplyReadsRows(t *testing.T) {
	for sql, want := range map[string]bool{
		"MERGE INTO t USING u ON t.k = u.k WHEN NOT MATCHED THEN INSERT VALUES (nextval('s'))": true,
		"INSERT INTO t TABLE u":                                   true,
		"ALTER TABLE t ADD COLUMN id BIGINT DEFAULT nextval('s')": true,
		"CREATE TABLE c (a INT)":                                  false,
		"DROP TABLE c":                                            false,
		"INSERT INTO t VALUES (1)":                                false,
	} {
		work := []pending{{cmd: wal.Command{Entry: wal.Txn{Entries: []wal.Entry{wal.Statement{SQL: "INSERT INTO x VALUES (1)"}, wal.Statement{SQL: sql}}}}}}
		if got := serialApply(work); got != want {
			t.Errorf("serialApply(%q) = %v, want %v", sql, got, want)
		}
	}
}
