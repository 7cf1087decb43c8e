// Package s3test starts a real S3-compatible server for tests: the Versity
// S3 Gateway (github.com/versity/versitygw) serving a temporary directory
// on a loopback port, installed with go install when it is missing.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/duckraft/duckraft/internal/freeport"
	"github.com/duckraft/duckraft/internal/syncbuf"
)

// Module is the gateway's package and the release go install installs.
const Module = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"

// installTimeout bounds downloading and building the gateway, and waiting
// for an install that make test started: it took 24 minutes on the loaded
// 2-core development machine with an empty module and build cache (308 s
// of CPU with an empty build cache and a full module cache).
const installTimeout = 40 * time.Minute

// AfterPassesEnv, when set, has Start skip its test at once when the
// gateway is not installed, instead of waiting for the background install
// or installing it. make test
// sets it when the gateway was missing at its start, and runs the S3 tests'
// packages again once its passes end: with an empty build cache the
// install takes 5 minutes of CPU (18 minutes beside other work), and a
// package that waited on it would hold the system pass, one package at a
// time, past its timeout.
const AfterPassesEnv = "DUCKRAFT_S3_AFTER_PASSES"

// Server is a running gateway with one account, its credentials random.
type Server struct {
	// Endpoint is its URL, http://127.0.0.1:port.
	Endpoint          string
	AccessKey, Secret string
	Region            string
	// Dir is the directory it serves: a bucket is a directory in it, an
	// object a file.
	Dir string
}

var (
	installOnce sync.Once
	installed   string
	installErr  string
)

// binary returns the gateway's binary, installing it when it is on
// neither PATH nor in $(go env GOPATH)/bin, and skips the test with the
// reason when it cannot be installed.
func binary(t testing.TB) string {
	t.Helper()
	installOnce.Do(func() {
		gobin := goBin()
		find := func() string {
			if p, err := exec.LookPath("versitygw"); err == nil {
				return p
			}
			if p := filepath.Join(gobin, "versitygw"); gobin != "" && isFile(p) {
				return p
			}
			return ""
		}
		if installed = find(); installed != "" {
			return
		}
		if os.Getenv(AfterPassesEnv) != "" {
			installErr = "versitygw is not installed yet (make test installs it in the background, and runs the S3 tests again after its passes)"
			return
		}
		// make test starts scripts/install-versitygw.sh in the background,
		// which holds this lock until its install ends: wait for it rather
		// than build a second copy, and install under the lock otherwise.
		if gobin != "" {
			unlock, err := lockInstall(t, filepath.Join(gobin, ".versitygw.lock"))
			if err != nil {
				installErr = "versitygw is not installed and its install lock failed: " + err.Error()
				return
			}
			defer unlock()
			if installed = find(); installed != "" {
				return
			}
		}
		gocmd, err := exec.LookPath("go")
		if err != nil {
			installErr = "versitygw is not installed and there is no go command to install it: go install " + Module
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, gocmd, "install", Module)
		if gobin != "" {
			cmd.Env = append(os.Environ(), "GOBIN="+gobin)
		}
		out, err := cmd.CombinedOutput()
		if installed = find(); installed == "" {
			installErr = "versitygw cannot be installed (go install " + Module + "): " + errString(err) + "\n" + string(out)
		}
	})
	if installed == "" {
		t.Skip(installErr)
	}
	return installed
}

// goBin is where go install puts binaries: GOBIN, else $(go env GOPATH)/bin.
func goBin() string {
	out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) == 2 && lines[0] != "" {
		return lines[0]
	}
	if len(lines) == 2 && lines[1] != "" {
		return filepath.Join(strings.Split(lines[1], string(os.PathListSeparator))[0], "bin")
	}
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

func errString(err error) string {
	if err == nil {
		return "no binary"
	}
	return err.Error()
}

// Start starts a gateway serving a new temporary directory in posix mode,
// stopped when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := binary(t)
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Endpoint: "http://" + addr, AccessKey: "DRTEST" + random(t, 7), Secret: random(t, 20),
		Region: "us-east-1", Dir: t.TempDir()}
	cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", s.Dir)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.Secret)
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start versitygw: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return s
		}
		select {
		case <-exited:
			t.Fatalf("versitygw exited at start:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen on %s within 60s:\n%s", addr, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func random(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return strings.ToUpper(hex.EncodeToString(b))
}

// Env points the AWS SDK's standard environment at the server, with its
// credentials, for the rest of the test, and hides the machine's own AWS
// configuration files and instance metadata; processes the test starts
// inherit it.
func (s *Server) Env(t testing.TB) {
	t.Helper()
	for k, v := range s.EnvVars() {
		t.Setenv(k, v)
	}
}

// EnvVars are the variables Env sets.
func (s *Server) EnvVars() map[string]string {
	return map[string]string{
		"AWS_ACCESS_KEY_ID":           s.AccessKey,
		"AWS_SECRET_ACCESS_KEY":       s.Secret,
		"AWS_REGION":                  s.Region,
		"AWS_ENDPOINT_URL":            s.Endpoint,
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED":   "true",
	}
}

// Client is an S3 client of the server with its credentials, for a test
// to look at and change what is stored.
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		BaseEndpoint: aws.String(s.Endpoint),
		Region:       s.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.Secret, ""),
		UsePathStyle: true,
	})
}

// CreateBucket creates a bucket.
func (s *Server) CreateBucket(t testing.TB, name string) {
	t.Helper()
	if _, err := s.Client().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
}

// Keys lists the keys of the objects in bucket, in order.
func (s *Server) Keys(t testing.TB, bucket string) []string {
	t.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(s.Client(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatalf("list %s: %v", bucket, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// Get returns an object's contents.
func (s *Server) Get(t testing.TB, bucket, key string) []byte {
	t.Helper()
	out, err := s.Client().GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get s3://%s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(out.Body); err != nil {
		t.Fatalf("get s3://%s/%s: %v", bucket, key, err)
	}
	return b.Bytes()
}

// Put stores an object.
func (s *Server) Put(t testing.TB, bucket, key string, body []byte) {
	t.Helper()
	if _, err := s.Client().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("put s3://%s/%s: %v", bucket, key, err)
	}
}
