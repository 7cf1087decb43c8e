// Package engine bridges an embedded DuckDB and the pure-Go Quack wire
// types. It talks to DuckDB through the C API (duckdb-go-bindings) and moves
// rows column by column: query results stream as wire.DataChunks that alias
// DuckDB's vectors, and appends copy wire vectors straight into DuckDB data
// chunks. See DESIGN.md for the guarantees and the aliasing rules.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	bindings "github.com/duckdb/duckdb-go-bindings"

	"github.com/duckraft/duckraft/node/sqlquote"
)

// Options configure a database when it is opened.
type Options struct {
	// Threads is DuckDB's worker thread count; 0 keeps DuckDB's default.
	Threads int
	// MemoryLimit is DuckDB's memory_limit, e.g. "4GB"; "" keeps the default.
	MemoryLimit string
	// AllowExternalAccess sets enable_external_access. It is off by default
	// because the database is served to remote clients.
	AllowExternalAccess bool
	// FsyncMode is DuckDB's fsync_mode: STANDARD (DuckDB's default), NONE
	// (no fsync of the WAL at commit) or FULL; "" keeps the default.
	FsyncMode string
	// Logger receives diagnostics; nil discards them.
	Logger *slog.Logger
}

// DB is an open DuckDB database. It is safe for concurrent use.
type DB struct {
	path     string
	log      *slog.Logger
	platform string
	catalog  string

	mu     sync.Mutex
	db     bindings.Database
	closed bool
	// clients are the connections InterruptClients interrupts; held, when
	// set, refuses their new statements (ReleaseClients clears it).
	clients map[*Conn]struct{}
	held    error
	// admitter gives client statements their turns, and clientMemory
	// is their operator_memory_limit (admit.go).
	admitter     Admitter
	clientMemory string
}

// Open opens the database file at path, or an in-memory database if path is
// empty.
func Open(path string, opts Options) (*DB, error) {
	var cfg bindings.Config
	if bindings.CreateConfig(&cfg) == bindings.StateError {
		return nil, fmt.Errorf("open %q: cannot create DuckDB config", path)
	}
	defer bindings.DestroyConfig(&cfg)
	settings := [][2]string{
		{"enable_external_access", strconv.FormatBool(opts.AllowExternalAccess)},
	}
	if opts.Threads > 0 {
		settings = append(settings, [2]string{"threads", strconv.Itoa(opts.Threads)})
	}
	if opts.MemoryLimit != "" {
		settings = append(settings, [2]string{"memory_limit", opts.MemoryLimit})
	}
	if opts.FsyncMode != "" {
		settings = append(settings, [2]string{"fsync_mode", opts.FsyncMode})
	}
	for _, s := range settings {
		if bindings.SetConfig(cfg, s[0], s[1]) == bindings.StateError {
			return nil, fmt.Errorf("open %q: invalid setting %s=%q", path, s[0], s[1])
		}
	}

	db := &DB{path: path, log: opts.Logger}
	if db.log == nil {
		db.log = slog.New(slog.DiscardHandler)
	}
	var msg string
	if bindings.OpenExt(path, &db.db, cfg, &msg) == bindings.StateError {
		bindings.Close(&db.db)
		return nil, fmt.Errorf("open %q: %w", path, newError(msg, bindings.ErrorTypeInvalid))
	}
	platform, err := db.queryString("PRAGMA platform")
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	db.platform = platform
	if db.catalog, err = db.queryString("SELECT current_database()"); err != nil {
		db.Close()
		return nil, fmt.Errorf("open %q: %w", path, err)
	}
	db.log.Debug("duckdb opened", "path", path, "version", db.Version(), "platform", platform)
	return db, nil
}

// queryString runs a query that returns one VARCHAR value.
func (db *DB) queryString(sql string) (string, error) {
	c, err := db.Connect()
	if err != nil {
		return "", err
	}
	defer c.Close()
	row, err := c.QueryRow(context.Background(), sql)
	if err != nil && !errors.Is(err, ErrNoRows) {
		return "", err
	}
	if len(row) > 0 {
		if s, ok := row[0].(string); ok {
			return s, nil
		}
	}
	return "", fmt.Errorf("%s: no string result", sql)
}

// Close closes the database. Connections still open keep DuckDB's instance
// alive until they are closed.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if !db.closed {
		db.closed = true
		bindings.Close(&db.db)
	}
	return nil
}

// Path is the database file path, "" for an in-memory database.
func (db *DB) Path() string { return db.path }

// Version is the DuckDB library version, e.g. "v2.0.0".
func (db *DB) Version() string { return LibraryVersion() }

// LibraryVersion is the version of the DuckDB library linked in, e.g.
// "v2.0.0", known without opening a database.
func LibraryVersion() string { return bindings.LibraryVersion() }

// Platform is DuckDB's platform string, e.g. "linux_amd64".
func (db *DB) Platform() string { return db.platform }

// Catalog is the database's catalog name, DuckDB's current_database():
// the file's base name without its extension, "memory" in memory.
func (db *DB) Catalog() string { return db.catalog }

// ResolveTable splits a table name as SQL writes it into the path of its
// schema and the table: t is main's, s.t schema s's, and a longer name a
// table of a nested schema (DuckDB 2.0), unless its first part is this
// database's catalog, which is dropped. The parts are not checked against
// the catalog: appending to them is.
func (db *DB) ResolveTable(name string) (schema []string, table string, err error) {
	parts := sqlquote.SplitPath(name)
	if len(parts) > 2 && parts[0] == db.catalog {
		parts = parts[1:]
	}
	for _, p := range parts {
		if p == "" {
			return nil, "", fmt.Errorf("%q is not a table name", name)
		}
	}
	if len(parts) == 1 {
		return []string{"main"}, parts[0], nil
	}
	return parts[:len(parts)-1], parts[len(parts)-1], nil
}

// Connect opens a new connection.
func (db *DB) Connect() (*Conn, error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil, errors.New("connect: database is closed")
	}
	c := &Conn{db: db}
	if bindings.Connect(db.db, &c.conn) == bindings.StateError {
		bindings.Disconnect(&c.conn)
		return nil, errors.New("connect: DuckDB refused the connection")
	}
	// DuckDB 2.0 buffers 10 MiB of a streaming result per connection
	// (1.5: 1 MB), which a 10M-row scan grows to over 100 MB of memory:
	// with hundreds of sessions that is the node's memory, for no gain in
	// speed, since results are cut into batches as they are sent.
	if _, err := c.Exec(context.Background(), "SET streaming_buffer_size = '1MB'"); err != nil {
		bindings.Disconnect(&c.conn)
		return nil, fmt.Errorf("connect: %w", err)
	}
	return c, nil
}
