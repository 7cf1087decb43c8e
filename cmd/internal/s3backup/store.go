// Package s3backup keeps duckraft backups in S3 and S3-compatible object
// stores: a backup and the state hash recorded for it as two objects, the
// hash under the backup's key + HashSuffix, written so that a reader never
// finds a backup beside another backup's hash. Credentials and the
// endpoint come from the environment as for every AWS SDK, never from a
// flag or a URL, and this package logs nothing. See DESIGN.md.
package s3backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"
)

// HashSuffix ends the key of the object that records a backup's state hash
// (the JSON of `duckraft hash`), as it ends the file beside a local backup.
const HashSuffix = ".hash"

// maxHashBytes bounds the hash object read: the JSON is under 200 bytes,
// and a bucket's contents are not trusted to be small.
const maxHashBytes = 64 << 10

// Upload parts. A body of unknown length (a backup streamed from a node)
// is sent in streamParts: 10,000 of them, S3's limit, hold 312 GiB, and
// streamConcurrency+1 parts are held in memory at once. A body of known
// length gets parts sized to fit it, which the uploader does itself.
const (
	streamPartBytes   = 32 << 20
	streamConcurrency = 2
	// abortTimeout bounds aborting a failed multipart upload, which goes on
	// after the caller's context ended so that no parts are left behind.
	abortTimeout = 30 * time.Second
)

// Errors callers branch on.
var (
	// ErrNoCredentials: the environment holds no credentials the SDK finds.
	ErrNoCredentials = errors.New("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or run with an instance or pod role)")
	// ErrDenied: the store refused the credentials or the request.
	ErrDenied = errors.New("the object store refused the credentials or the request: check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the bucket's permissions")
	// ErrNoBucket: the bucket does not exist.
	ErrNoBucket = errors.New("no such bucket")
	// ErrNotFound: no object at the key.
	ErrNotFound = errors.New("no such object")
	// ErrNoHash: the backup is there and the object recording its state
	// hash is not, so it cannot be checked: a backup still being written,
	// or copied without its hash.
	ErrNoHash = errors.New("no state hash recorded beside the backup (its " + HashSuffix + " object)")
)

// Store is a client of one object store.
type Store struct {
	s3 *s3.Client
	tm *transfermanager.Client
}

// Open makes a client from the environment, as the AWS SDKs read it:
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile, SSO, web
// identity, an instance role), AWS_REGION (us-east-1 when unset, which
// S3-compatible stores accept), AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3
// for an S3-compatible store, which is then addressed path-style
// (http://host/bucket/key), as they all serve it, and
// AWS_REQUEST_CHECKSUM_CALCULATION. It checks that credentials are found,
// not that the store takes them. The SDK's own warnings (falling back to
// an older instance metadata protocol, say) go to log, which may be nil;
// it logs no request unless asked to, so no credential.
func Open(ctx context.Context, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(sdkLogger{log}))
	if err != nil {
		return nil, fmt.Errorf("S3 configuration from the environment: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoCredentials, err)
	}
	c := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = o.BaseEndpoint != nil
	})
	return &Store{s3: c, tm: transfermanager.New(c, func(o *transfermanager.Options) {
		o.FailTimeout = abortTimeout
		// The uploader ignores the client's setting and sends a CRC32 of
		// every upload unless told otherwise; AWS_REQUEST_CHECKSUM_CALCULATION=
		// when_required is how an operator turns that off for a store that
		// refuses such checksums, and it must reach the uploader too.
		o.RequestChecksumCalculation = cfg.RequestChecksumCalculation
	})}, nil
}

// Put uploads the backup read from body to loc, then the state hash
// recorded for it, which hash returns once the body is uploaded, to loc's
// hash object, and returns the bytes uploaded. size is body's length, or
// -1 when unknown (a stream). A hash object
// already at loc is deleted first, so a failure at any step leaves at loc
// either the old backup without a hash, the new one without a hash, or
// the new one with its own: never one with another's. A body that ends in
// an error, or a cancelled ctx, leaves no new object (a multipart upload
// is aborted).
func (s *Store) Put(ctx context.Context, loc Location, body io.Reader, size int64, hash func() ([]byte, error)) (int64, error) {
	if err := s.Delete(ctx, loc.hash()); err != nil {
		return 0, fmt.Errorf("remove the old state hash: %w", err)
	}
	cr := &countingReader{r: body}
	in := &transfermanager.UploadObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key), Body: cr}
	var opts []func(*transfermanager.Options)
	if size >= 0 {
		in.ContentLength = aws.Int64(size)
	} else {
		opts = append(opts, func(o *transfermanager.Options) {
			o.PartSizeBytes, o.Concurrency = streamPartBytes, streamConcurrency
		})
	}
	if _, err := s.tm.UploadObject(ctx, in, opts...); err != nil {
		return cr.n, fmt.Errorf("upload %s: %w", loc, classify(err))
	}
	if size >= 0 && cr.n != size {
		// The uploader stops at the declared length; a body that was
		// longer or shorter is not the backup.
		return cr.n, errors.Join(fmt.Errorf("upload %s: read %d bytes of a %d-byte backup", loc, cr.n, size),
			s.Delete(ctx, loc))
	}
	b, err := hash()
	if err != nil {
		return cr.n, errors.Join(fmt.Errorf("upload %s: %w", loc, err), s.Delete(ctx, loc))
	}
	h := loc.hash()
	if _, err := s.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(h.Bucket), Key: aws.String(h.Key),
		Body: bytes.NewReader(b), ContentLength: aws.Int64(int64(len(b)))}); err != nil {
		return cr.n, fmt.Errorf("backup %s uploaded, its state hash not recorded: upload %s: %w", loc, h, classify(err))
	}
	return cr.n, nil
}

// Get downloads the backup at loc to the new file path and the state hash
// recorded for it to path + HashSuffix, both mode 0600 and synced. It
// reads the hash first and refuses a backup without one (ErrNoHash). The
// two are not read atomically: a backup replaced between the two reads
// does not match the hash read, which the restore's check refuses. On
// error neither file is left.
func (s *Store) Get(ctx context.Context, loc Location, path string) (err error) {
	h := loc.hash()
	hash, err := s.getSmall(ctx, h, maxHashBytes)
	if errors.Is(err, ErrNotFound) {
		if _, herr := s.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key)}); herr != nil {
			return fmt.Errorf("get %s: %w", loc, classify(herr))
		}
		return fmt.Errorf("%s: %w", loc, ErrNoHash)
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(path)
			os.Remove(path + HashSuffix)
		}
	}()
	if err := s.download(ctx, loc, path); err != nil {
		return err
	}
	return writeSynced(path+HashSuffix, bytes.NewReader(hash))
}

// getSmall reads the object at loc, refusing one over max bytes.
func (s *Store) getSmall(ctx context.Context, loc Location, max int64) ([]byte, error) {
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key)})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", loc, classify(err))
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", loc, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("get %s: over %d bytes: not a recorded state hash", loc, max)
	}
	return b, nil
}

// download streams the object at loc into the new file path, checking
// that it received the length the store announced.
func (s *Store) download(ctx context.Context, loc Location, path string) error {
	out, err := s.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key)})
	if err != nil {
		return fmt.Errorf("get %s: %w", loc, classify(err))
	}
	defer out.Body.Close()
	cr := &countingReader{r: out.Body}
	if err := writeSynced(path, cr); err != nil {
		return fmt.Errorf("get %s after %d bytes: %w", loc, cr.n, err)
	}
	if want := aws.ToInt64(out.ContentLength); out.ContentLength != nil && cr.n != want {
		return fmt.Errorf("get %s: cut short after %d of %d bytes", loc, cr.n, want)
	}
	return nil
}

// List returns the names of the objects directly under the prefix loc
// (their keys without the prefix and its "/"), in the store's order.
func (s *Store) List(ctx context.Context, loc Location) ([]string, error) {
	prefix := ""
	if loc.Key != "" {
		prefix = loc.Key + "/"
	}
	var names []string
	p := s3.NewListObjectsV2Paginator(s.s3, &s3.ListObjectsV2Input{Bucket: aws.String(loc.Bucket),
		Prefix: aws.String(prefix), Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", loc, classify(err))
		}
		for _, o := range page.Contents {
			if name, ok := strings.CutPrefix(aws.ToString(o.Key), prefix); ok && name != "" {
				names = append(names, name)
			}
		}
	}
	return names, nil
}

// Delete deletes the object at loc; one that is not there is no error.
func (s *Store) Delete(ctx context.Context, loc Location) error {
	_, err := s.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(loc.Bucket), Key: aws.String(loc.Key)})
	if err != nil && !errors.Is(classify(err), ErrNotFound) {
		return fmt.Errorf("delete %s: %w", loc, classify(err))
	}
	return nil
}

// sdkLogger hands the SDK's messages to slog, instead of its default
// logger's own lines on stderr.
type sdkLogger struct{ log *slog.Logger }

func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	level := slog.LevelDebug
	if c == logging.Warn {
		level = slog.LevelWarn
	}
	l.log.Log(context.Background(), level, fmt.Sprintf(format, v...), "component", "s3")
}

// classify wraps err with the sentinel of the store's answer, so that
// callers and messages tell a missing bucket from refused credentials.
func classify(err error) error {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.ErrorCode() {
	case "NoSuchBucket":
		return fmt.Errorf("%w: %w", ErrNoBucket, err)
	case "NoSuchKey", "NotFound":
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "InvalidToken", "ExpiredToken", "Forbidden":
		return fmt.Errorf("%w: %w", ErrDenied, err)
	}
	return err
}

// writeSynced writes r to the new file path, mode 0600, and syncs it.
func writeSynced(path string, r io.Reader) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(path)
		return err
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
