package nodeapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/duckraft/duckraft/node/tokens"
)

// TestBackup serves BackupPath with a backup function that writes a known
// body, and checks what the client gets: the body and the hash, or a
// refusal with its code, or an error for an answer cut short.
func TestBackup(t *testing.T) {
	creds := Credentials{Tokens: (&tokens.Set{}).Add("client-token", tokens.Admin), Node: "node-cred"}
	body := bytes.Repeat([]byte("duckdb"), 1<<18)
	want := StateHash{Index: 42, Hash: "abc123", Rows: 7}
	for _, tc := range []struct {
		name   string
		client *Client
		backup func(context.Context, BackupSend) error
		code   Code
		cut    bool
	}{
		{"client token", &Client{Token: "client-token"}, nil, "", false},
		{"node credential", &Client{Node: "node-cred"}, nil, "", false},
		{"no credential", &Client{}, nil, CodeUnauthorized, false},
		{"wrong token", &Client{Token: "node-cred-but-not"}, nil, CodeUnauthorized, false},
		{"busy", &Client{Token: "client-token"}, func(context.Context, BackupSend) error {
			return Errorf(CodeBusy, "already writing a backup")
		}, CodeBusy, false},
		{"failed before sending", &Client{Token: "client-token"}, func(context.Context, BackupSend) error {
			return errors.New("disk full")
		}, CodeFailed, false},
		{"cut short", &Client{Token: "client-token"}, func(_ context.Context, send BackupSend) error {
			return send(want, io.MultiReader(bytes.NewReader(body[:1000]), errReader{}), int64(len(body)))
		}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backup := tc.backup
			if backup == nil {
				backup = func(_ context.Context, send BackupSend) error {
					return send(want, bytes.NewReader(body), int64(len(body)))
				}
			}
			srv := httptest.NewServer(BackupHandler(creds, backup))
			defer srv.Close()
			addr := strings.TrimPrefix(srv.URL, "http://")
			var got bytes.Buffer
			h, err := tc.client.Backup(context.Background(), addr, &got)
			switch {
			case tc.code != "":
				if CodeOf(err) != tc.code {
					t.Fatalf("err = %v, want code %s", err, tc.code)
				}
			case tc.cut:
				if !errors.Is(err, ErrUnreachable) {
					t.Fatalf("err = %v, want ErrUnreachable for a backup cut short", err)
				}
			case err != nil:
				t.Fatal(err)
			case h != want || !bytes.Equal(got.Bytes(), body):
				t.Fatalf("got %+v and %d bytes, want %+v and %d", h, got.Len(), want, len(body))
			}
		})
	}
	t.Run("GET", func(t *testing.T) {
		srv := httptest.NewServer(BackupHandler(creds, nil))
		defer srv.Close()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+BackupPath, nil)
		req.Header.Set("Authorization", "Bearer client-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("GET: %s", resp.Status)
		}
	})
	t.Run("answer without the backup headers", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body) }))
		defer srv.Close()
		_, err := (&Client{Token: "t"}).Backup(context.Background(), strings.TrimPrefix(srv.URL, "http://"), io.Discard)
		if !errors.Is(err, ErrUnreachable) {
			t.Fatalf("err = %v, want ErrUnreachable", err)
		}
	})
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("backup file vanished") }

// TestBackupStalledClient: a client that asks for a backup and stops
// reading does not hold the backup (its slot, its file) for longer than
// backupStall without progress.
func TestBackupStalledClient(t *testing.T) {
	defer func(d time.Duration) { backupStall = d }(backupStall)
	backupStall = 300 * time.Millisecond
	ended := make(chan error, 1)
	srv := httptest.NewServer(BackupHandler(Credentials{Tokens: (&tokens.Set{}).Add("tok", tokens.Admin)}, func(_ context.Context, send BackupSend) error {
		const size = 256 << 20
		err := send(StateHash{Index: 1, Hash: "h"}, io.LimitReader(zeros{}, size), size)
		ended <- err
		return err
	}))
	defer srv.Close()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok\r\nContent-Length: 0\r\n\r\n", BackupPath)
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("status line %q, %v", line, err)
	}
	// Now read nothing more.
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("a backup sent to a client that reads nothing completed")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a stalled client held the backup for 60s")
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
