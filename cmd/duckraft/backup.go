package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/duckraft/duckraft/cmd/internal/s3backup"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// runBackup asks the member named by --server for a backup of its database
// at its applied index and writes it to --out: a DuckDB database file that
// a plain DuckDB opens and duckraftd --restore seeds a new cluster from.
func runBackup(args []string, stdout, stderr io.Writer) int {
	var out string
	c, code := parseAPIFlags("backup", args, 0, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&out, "out", "", "file to write the backup to (required); written as FILE.tmp, synced and renamed; or an object s3://bucket/key, with credentials and endpoint from AWS_* variables")
	})
	if c == nil {
		return code
	}
	if out == "" {
		fmt.Fprintln(stderr, "duckraft backup: --out FILE is required")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var h nodeapi.StateHash
	var size int64
	var err error
	if s3backup.IsURL(out) {
		// The SDK's warnings, if any, on stderr.
		log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		h, size, err = backupToObject(ctx, c.api, c.addr, out, log)
	} else {
		h, size, err = backup(ctx, c.api, c.addr, out)
	}
	if err != nil {
		fmt.Fprintln(stderr, "duckraft backup:", err)
		return 1
	}
	fmt.Fprintf(stdout, "backup at applied index %d written to %s (%d bytes, %d rows, state hash %s)\n", h.Index, out, size, h.Rows, h.Hash)
	fmt.Fprintf(stdout, "state hash recorded in %s%s: keep it beside the backup, duckraftd --restore checks the backup against it\n", out, hashSuffix)
	return 0
}

// hashSuffix names the file beside a backup that records its state hash:
// the JSON of nodeapi.StateHash, which duckraftd --restore checks the
// backup against (replication.BackupHashSuffix; the CLI does not link
// replication).
const hashSuffix = ".hash"

// backup streams the backup of the node at addr to out atomically: into
// out.tmp, synced, then renamed over out, so out is either the old file or
// a complete backup. A backup cut short leaves nothing. The state hash the
// node answered is recorded beside it in out.hash, written the same way;
// the old out.hash goes before out is replaced, so a crash between the
// two renames leaves a backup without a hash, never with another's.
func backup(ctx context.Context, api *nodeapi.Client, addr, out string) (nodeapi.StateHash, int64, error) {
	tmp := out + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nodeapi.StateHash{}, 0, err
	}
	cw := &countingWriter{w: f}
	h, err := api.Backup(ctx, addr, cw)
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = writeSynced(out+hashSuffix+".tmp", h)
	}
	if err == nil {
		if err = os.Remove(out + hashSuffix); errors.Is(err, os.ErrNotExist) {
			err = nil
		}
	}
	if err == nil {
		err = os.Rename(tmp, out)
	}
	if err == nil {
		err = os.Rename(out+hashSuffix+".tmp", out+hashSuffix)
	}
	if err != nil {
		os.Remove(tmp)
		os.Remove(out + hashSuffix + ".tmp")
		return h, 0, err
	}
	d, err := os.Open(filepath.Dir(out))
	if err != nil {
		return h, cw.n, err
	}
	defer d.Close()
	return h, cw.n, d.Sync()
}

// writeSynced writes h as JSON to a new file at path and syncs it.
func writeSynced(path string, h nodeapi.StateHash) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// backupToObject streams the backup of the node at addr into the object
// out (s3://bucket/key) as it arrives, without a local copy, and then
// records the state hash the node answered in the object out.hash. A
// backup cut short (the node's answer shorter than it announced, an
// interrupt) is not uploaded: the upload fails with the stream and is
// aborted (s3backup.Store.Put says what is left at out on a failure).
func backupToObject(ctx context.Context, api *nodeapi.Client, addr, out string, log *slog.Logger) (nodeapi.StateHash, int64, error) {
	loc, err := s3backup.ParseObject(out)
	if err != nil {
		return nodeapi.StateHash{}, 0, err
	}
	store, err := s3backup.Open(ctx, log)
	if err != nil {
		return nodeapi.StateHash{}, 0, err
	}
	pr, pw := io.Pipe()
	var h nodeapi.StateHash
	var berr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		h, berr = api.Backup(ctx, addr, pw)
		// The upload sees the end of the stream only now, after Backup
		// checked the announced length: a short backup ends in an error.
		pw.CloseWithError(berr)
	}()
	// Put asks for the state hash once the whole body is uploaded, and so
	// once Backup has returned it.
	hash := func() ([]byte, error) {
		<-done
		if berr != nil {
			return nil, berr
		}
		b, err := json.Marshal(h)
		return append(b, '\n'), err
	}
	n, err := store.Put(ctx, loc, pr, -1, hash)
	// An upload that failed early leaves Backup blocked on the pipe.
	pr.CloseWithError(errors.Join(err, io.ErrClosedPipe))
	<-done
	if err != nil {
		// The upload's error names the cause either way: a stream that
		// ended in an error is the upload's error too, and a Backup cut
		// off by a failed upload would only say it was cut short.
		return h, n, err
	}
	return h, n, berr
}
