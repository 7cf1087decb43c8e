package s3backup_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/duckraft/duckraft/cmd/internal/s3backup"
	"github.com/duckraft/duckraft/cmd/internal/s3backup/s3test"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		url, object, prefix string // "" where refused
	}{
		{"s3://bucket/key.duckdb", "s3://bucket/key.duckdb", "s3://bucket/key.duckdb"},
		{"s3://my.bucket-1/a/b/c", "s3://my.bucket-1/a/b/c", "s3://my.bucket-1/a/b/c"},
		{"s3://bucket", "", "s3://bucket"},
		{"s3://bucket/", "", "s3://bucket"},
		{"s3://bucket/backups/", "", "s3://bucket/backups"},
		{"s3://bucket/a?b#c", "s3://bucket/a?b#c", "s3://bucket/a?b#c"},
		{"S3://bucket/key", "", ""},
		{"https://bucket/key", "", ""},
		{"bucket/key", "", ""},
		{"s3:///key", "", ""},
		{"s3://ab/key", "", ""},
		{"s3://Bucket/key", "", ""},
		{"s3://-bucket/key", "", ""},
		{"s3://bucket_1/key", "", ""},
		{"s3://" + strings.Repeat("b", 64) + "/key", "", ""},
		{"s3://bucket/a//b", "", ""},
		{"s3://bucket/a/../b", "", ""},
		{"s3://bucket/./b", "", ""},
		{"s3://bucket/a\nb", "", ""},
		{"s3://bucket/a\xffb", "", ""},
		{"s3://bucket/" + strings.Repeat("k", 1020), "", ""},
		{"s3://bucket/" + strings.Repeat("k", 1019), "s3://bucket/" + strings.Repeat("k", 1019), ""},
	} {
		for _, p := range []struct {
			name  string
			parse func(string) (s3backup.Location, error)
			want  string
		}{{"object", s3backup.ParseObject, tc.object}, {"prefix", s3backup.ParsePrefix, tc.prefix}} {
			l, err := p.parse(tc.url)
			switch {
			case p.want == "" && !errors.Is(err, s3backup.ErrBadURL):
				t.Errorf("%s %q: %v, %v; want ErrBadURL", p.name, tc.url, l, err)
			case p.want != "" && (err != nil || l.String() != p.want):
				t.Errorf("%s %q: %v, %v; want %s", p.name, tc.url, l, err, p.want)
			}
		}
	}
	// A credential written into the URL is refused and not repeated.
	_, err := s3backup.ParseObject("s3://AKIDEXAMPLE:wJalrXUtnFEMIK7MDENG@bucket/key")
	if !errors.Is(err, s3backup.ErrBadURL) || strings.Contains(err.Error(), "wJalrXUtnFEMIK7MDENG") || strings.Contains(err.Error(), "AKIDEXAMPLE") {
		t.Fatalf("URL with user information: %v", err)
	}
}

// store starts a server, points the environment at it and opens a Store.
func store(t *testing.T) (*s3test.Server, *s3backup.Store) {
	t.Helper()
	srv := s3test.Start(t)
	srv.Env(t)
	srv.CreateBucket(t, "backups")
	st, err := s3backup.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv, st
}

func hashOf(b string) func() ([]byte, error) {
	return func() ([]byte, error) { return []byte(b), nil }
}

// failingReader yields n bytes of data, then fails.
type failingReader struct{ n int }

var errBody = errors.New("the stream broke")

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errBody
	}
	k := min(len(p), f.n)
	for i := range p[:k] {
		p[i] = byte(i)
	}
	f.n -= k
	return k, nil
}

func TestPutGet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv, st := store(t)
	ctx := context.Background()
	small := bytes.Repeat([]byte("duckdb"), 1000)
	// Past the uploader's 16 MiB threshold: a multipart upload, streamed
	// (length unknown) and with its length.
	large := make([]byte, 40<<20+12345)
	for i := range large {
		large[i] = byte(i * 7)
	}
	for _, tc := range []struct {
		name string
		key  string
		body []byte
		size int64
	}{
		{"small, streamed", "a/small.duckdb", small, -1},
		{"small, known length", "a/small2.duckdb", small, int64(len(small))},
		{"multipart, streamed", "large.duckdb", large, -1},
		{"multipart, known length", "b/large.duckdb", large, int64(len(large))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loc := s3backup.Location{Bucket: "backups", Key: tc.key}
			n, err := st.Put(ctx, loc, io.MultiReader(bytes.NewReader(tc.body)), tc.size, hashOf(`{"applied_index":7}`))
			if err != nil || n != int64(len(tc.body)) {
				t.Fatalf("put: %d, %v; want %d bytes", n, err, len(tc.body))
			}
			path := filepath.Join(t.TempDir(), "got.duckdb")
			if err := st.Get(ctx, loc, path); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(got, tc.body) {
				t.Fatalf("downloaded %d bytes (%v), uploaded %d", len(got), err, len(tc.body))
			}
			if h, err := os.ReadFile(path + s3backup.HashSuffix); err != nil || string(h) != `{"applied_index":7}` {
				t.Fatalf("hash beside the download: %q, %v", h, err)
			}
			for _, p := range []string{path, path + s3backup.HashSuffix} {
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("%s: %v, %v; want mode 0600", p, fi.Mode(), err)
				}
			}
		})
	}
	if keys := srv.Keys(t, "backups"); len(keys) != 8 {
		t.Fatalf("bucket holds %v; want the 4 backups and their hashes", keys)
	}
}

// TestPutFailsCleanly: a body that breaks (a node's stream cut short)
// leaves no new object and no multipart upload, and the hash object at the
// key is gone before the upload starts, so that no backup is ever found
// beside another's hash; the old backup, left without one, is refused.
func TestPutFailsCleanly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv, st := store(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		n    int
	}{{"single part", 1 << 20}, {"multipart", 40 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			key := strings.ReplaceAll(tc.name, " ", "-") + ".duckdb"
			srv.Put(t, "backups", key, []byte("the old backup"))
			srv.Put(t, "backups", key+".hash", []byte(`{"old":1}`))
			loc := s3backup.Location{Bucket: "backups", Key: key}
			hashAsked := false
			_, err := st.Put(ctx, loc, &failingReader{n: tc.n}, -1, func() ([]byte, error) { hashAsked = true; return nil, nil })
			if !errors.Is(err, errBody) || hashAsked {
				t.Fatalf("put of a broken body: %v (hash asked: %v); want the body's error", err, hashAsked)
			}
			if got := string(srv.Get(t, "backups", key)); got != "the old backup" {
				t.Fatalf("the key holds %q after a failed upload", got)
			}
			if keys := srv.Keys(t, "backups"); strings.Contains(strings.Join(keys, " "), key+".hash") {
				t.Fatalf("bucket holds %v: the old hash survived", keys)
			}
			if err := st.Get(ctx, loc, filepath.Join(t.TempDir(), "x")); !errors.Is(err, s3backup.ErrNoHash) {
				t.Fatalf("get of a backup without its hash: %v, want ErrNoHash", err)
			}
			mpu, err := srv.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("backups")})
			if err != nil || len(mpu.Uploads) != 0 {
				t.Fatalf("multipart uploads left: %v, %v", mpu, err)
			}
		})
	}
}

func TestGetRefuses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv, st := store(t)
	ctx := context.Background()
	srv.Put(t, "backups", "nohash.duckdb", []byte("a backup"))
	srv.Put(t, "backups", "bighash.duckdb", []byte("a backup"))
	srv.Put(t, "backups", "bighash.duckdb.hash", make([]byte, 65<<10))
	for _, tc := range []struct {
		name, bucket, key string
		is                error
		says              string
	}{
		{"missing bucket", "nobucket", "x.duckdb", s3backup.ErrNoBucket, "no such bucket"},
		{"missing object", "backups", "missing.duckdb", s3backup.ErrNotFound, "s3://backups/missing.duckdb"},
		{"backup without hash", "backups", "nohash.duckdb", s3backup.ErrNoHash, "no state hash recorded"},
		{"hash object too large", "backups", "bighash.duckdb", nil, "not a recorded state hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			err := st.Get(ctx, s3backup.Location{Bucket: tc.bucket, Key: tc.key}, filepath.Join(dir, "b.duckdb"))
			if err == nil || tc.is != nil && !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("get: %v; want %v saying %q", err, tc.is, tc.says)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Fatalf("a refused get left %v", left)
			}
		})
	}
}

// TestCredentials: wrong credentials are refused with ErrDenied, missing
// ones with ErrNoCredentials, and no error repeats a secret.
func TestCredentials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv, _ := store(t)
	ctx := context.Background()
	t.Setenv("AWS_SECRET_ACCESS_KEY", "WRONG"+srv.Secret)
	st, err := s3backup.Open(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	loc := s3backup.Location{Bucket: "backups", Key: "k.duckdb"}
	_, perr := st.Put(ctx, loc, strings.NewReader("x"), 1, hashOf("{}"))
	gerr := st.Get(ctx, loc, filepath.Join(t.TempDir(), "k"))
	_, lerr := st.List(ctx, loc)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	_, oerr := s3backup.Open(ctx, nil)
	for _, tc := range []struct {
		name string
		err  error
		is   error
	}{{"put", perr, s3backup.ErrDenied}, {"get", gerr, s3backup.ErrDenied}, {"list", lerr, s3backup.ErrDenied},
		{"open without credentials", oerr, s3backup.ErrNoCredentials}} {
		if !errors.Is(tc.err, tc.is) {
			t.Errorf("%s: %v; want %v", tc.name, tc.err, tc.is)
		} else if msg := tc.err.Error(); strings.Contains(msg, srv.Secret) || strings.Contains(msg, srv.AccessKey) {
			t.Errorf("%s: the error holds a credential: %s", tc.name, msg)
		}
	}
}

func TestListDelete(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv, st := store(t)
	ctx := context.Background()
	for _, k := range []string{"top.duckdb", "p/a.duckdb", "p/a.duckdb.hash", "p/sub/b.duckdb", "pp/c.duckdb"} {
		srv.Put(t, "backups", k, []byte(k))
	}
	for _, tc := range []struct {
		prefix string
		want   string
	}{{"", "top.duckdb"}, {"p", "a.duckdb a.duckdb.hash"}, {"p/sub", "b.duckdb"}, {"none", ""}} {
		names, err := st.List(ctx, s3backup.Location{Bucket: "backups", Key: tc.prefix})
		if err != nil || strings.Join(names, " ") != tc.want {
			t.Errorf("list %q: %v, %v; want %q", tc.prefix, names, err, tc.want)
		}
	}
	for _, k := range []string{"p/a.duckdb", "p/missing.duckdb"} {
		if err := st.Delete(ctx, s3backup.Location{Bucket: "backups", Key: k}); err != nil {
			t.Errorf("delete %s: %v", k, err)
		}
	}
	if got := strings.Join(srv.Keys(t, "backups"), " "); got != "p/a.duckdb.hash p/sub/b.duckdb pp/c.duckdb top.duckdb" {
		t.Fatalf("after delete: %s", got)
	}
}

// TestChecksumSetting: uploads carry a CRC32 the store records, unless
// AWS_REQUEST_CHECKSUM_CALCULATION=when_required says to send none (for a
// store that refuses them): the uploader ignores the client's setting by
// itself.
func TestChecksumSetting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an S3 server")
	}
	srv, _ := store(t)
	ctx := context.Background()
	for _, tc := range []struct {
		setting  string
		checksum bool
	}{{"", true}, {"when_supported", true}, {"when_required", false}} {
		t.Run("setting "+tc.setting, func(t *testing.T) {
			t.Setenv("AWS_REQUEST_CHECKSUM_CALCULATION", tc.setting)
			st, err := s3backup.Open(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, size := range []int{1 << 10, 20 << 20} {
				key := "sum-" + tc.setting + "-" + strings.Repeat("x", size>>20) + ".duckdb"
				loc := s3backup.Location{Bucket: "backups", Key: key}
				if _, err := st.Put(ctx, loc, bytes.NewReader(make([]byte, size)), -1, hashOf("{}")); err != nil {
					t.Fatal(err)
				}
				head, err := srv.Client().HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("backups"), Key: aws.String(key),
					ChecksumMode: "ENABLED"})
				if err != nil {
					t.Fatal(err)
				}
				if got := aws.ToString(head.ChecksumCRC32) != ""; got != tc.checksum {
					t.Errorf("%d bytes: CRC32 recorded %v (%q), want %v", size, got, aws.ToString(head.ChecksumCRC32), tc.checksum)
				}
			}
		})
	}
}
