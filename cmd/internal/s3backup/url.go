package s3backup

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Scheme starts every location in an object store.
const Scheme = "s3://"

// ErrBadURL is why an s3:// location is refused before any request.
var ErrBadURL = errors.New("bad S3 URL")

// maxKeyBytes is S3's limit on an object key. A backup's key leaves room
// for the HashSuffix of its hash object, and a prefix for the names of
// scheduled backups.
const (
	maxKeyBytes  = 1024
	maxNameBytes = 64
)

// IsURL reports whether s names a location in an object store rather than
// a local file.
func IsURL(s string) bool { return strings.HasPrefix(s, Scheme) }

// Location is an object, or a prefix of objects, in a bucket.
type Location struct {
	Bucket string
	// Key is the object's key, or for a prefix the key's part before the
	// "/" that ends it ("" for the bucket's top).
	Key string
}

func (l Location) String() string {
	if l.Key == "" {
		return Scheme + l.Bucket
	}
	return Scheme + l.Bucket + "/" + l.Key
}

// Child is the object named name under the prefix l.
func (l Location) Child(name string) Location {
	if l.Key == "" {
		return Location{Bucket: l.Bucket, Key: name}
	}
	return Location{Bucket: l.Bucket, Key: l.Key + "/" + name}
}

// hash is the object that records the state hash of the backup at l.
func (l Location) hash() Location { return Location{Bucket: l.Bucket, Key: l.Key + HashSuffix} }

// ParseObject parses s3://bucket/key, the location of one backup.
func ParseObject(s string) (Location, error) {
	l, err := parse(s)
	if err != nil {
		return Location{}, err
	}
	if l.Key == "" || strings.HasSuffix(l.Key, "/") {
		return Location{}, fmt.Errorf("%w: %q names no object: give s3://bucket/key", ErrBadURL, s)
	}
	if err := checkKey(s, l.Key, maxKeyBytes-len(HashSuffix)); err != nil {
		return Location{}, err
	}
	return l, nil
}

// ParsePrefix parses s3://bucket or s3://bucket/prefix (a "/" at its end
// is the same prefix), where scheduled backups go: each is an object under
// the prefix.
func ParsePrefix(s string) (Location, error) {
	l, err := parse(s)
	if err != nil {
		return Location{}, err
	}
	l.Key = strings.TrimSuffix(l.Key, "/")
	if l.Key == "" {
		return l, nil
	}
	if err := checkKey(s, l.Key, maxKeyBytes-1-maxNameBytes-len(HashSuffix)); err != nil {
		return Location{}, err
	}
	return l, nil
}

func parse(s string) (Location, error) {
	rest, ok := strings.CutPrefix(s, Scheme)
	if !ok {
		return Location{}, fmt.Errorf("%w: %q does not start with %s", ErrBadURL, s, Scheme)
	}
	bucket, key, _ := strings.Cut(rest, "/")
	if strings.Contains(bucket, "@") {
		// Not echoed: what stands before the @ would be a credential.
		return Location{}, fmt.Errorf("%w: user information in an S3 URL; credentials come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY), never from the URL", ErrBadURL)
	}
	if err := checkBucket(bucket); err != nil {
		return Location{}, fmt.Errorf("%w: %q: %v", ErrBadURL, s, err)
	}
	return Location{Bucket: bucket, Key: key}, nil
}

// checkBucket applies S3's rules for bucket names: 3 to 63 lowercase
// letters, digits, dots and hyphens, starting and ending with a letter or
// digit.
func checkBucket(b string) error {
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket name %q is not 3 to 63 characters", b)
	}
	for i, r := range b {
		lower := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		if !lower && (r != '.' && r != '-' || i == 0 || i == len(b)-1) {
			return fmt.Errorf("bucket name %q holds %q: bucket names are lowercase letters, digits, dots and hyphens, starting and ending with a letter or digit", b, r)
		}
	}
	return nil
}

// checkKey refuses keys that S3-compatible stores keeping objects as files
// cannot hold or would read as other paths: empty, "." or ".." segments,
// control characters, invalid UTF-8, and keys past max bytes.
func checkKey(s, key string, max int) error {
	if len(key) > max {
		return fmt.Errorf("%w: %q: the key is %d bytes, at most %d here", ErrBadURL, s, len(key), max)
	}
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: %q: the key is not UTF-8", ErrBadURL, s)
	}
	if strings.IndexFunc(key, unicode.IsControl) >= 0 {
		return fmt.Errorf("%w: %q: the key holds a control character", ErrBadURL, s)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q: the key has an empty, \".\" or \"..\" segment", ErrBadURL, s)
		}
	}
	return nil
}
