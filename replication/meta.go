package replication

// MetaSchema is the schema that holds duckraft's own bookkeeping tables
// (applied index, idempotency keys); it is hidden from clients' catalogs.
const MetaSchema = metaSchema
