package replication

// MetaSchema is the schema that holds duckraft's own bookkeeping tables
// (applied index, idempotency keys); it is hidden from clients' catalogs.
const MetaSchema = metaSchema

// AppliedQuery reads the applied index stored in the database: inside a
// transaction, the index of the transaction's snapshot. Each batch leaves
// its last index as the largest in the keys table, in a key record or a
// marker row; the applied table holds the index of a restored snapshot.
const AppliedQuery = `SELECT greatest((SELECT idx FROM "` + metaSchema + `".applied WHERE id = 1), ` +
	`(SELECT coalesce(max(idx), 0) FROM "` + metaSchema + `".keys))`
