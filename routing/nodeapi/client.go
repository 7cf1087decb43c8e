package nodeapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/duckraft/duckraft/wal"
)

// ErrUnreachable marks a request that got no answer from the node: the
// connection failed, or what came back was not this API's. The request
// may not have reached the node, or may have been applied (a forwarded
// write carries an idempotency key for that reason).
var ErrUnreachable = errors.New("nodeapi: node unreachable")

// Client calls the API of nodes by their Quack address (host:port).
type Client struct {
	// Token is the client token, sent with Status and Hash, and with
	// TransferLeadership when Node is empty (an admin token may transfer).
	Token string
	// Node is the node credential (clusterkey.NodeAPI), sent with Write
	// and TransferLeadership, and with Status and Hash when Token is
	// empty.
	Node string
	// TLS is set when nodes serve HTTPS; HTTP's TLSClientConfig then says
	// whom to trust.
	TLS bool
	// HTTP sends the requests; nil is DefaultHTTP.
	HTTP *http.Client
}

// DefaultHTTP keeps connections to the nodes open; calls bound their own
// time through their context.
var DefaultHTTP = &http.Client{Transport: &http.Transport{
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     90 * time.Second,
}}

func (c *Client) url(addr, path string) string {
	scheme := "http"
	if c.TLS {
		scheme = "https"
	}
	return scheme + "://" + addr + path
}

// reader is the credential a read-only request (Status, Hash) sends.
func (c *Client) reader() string {
	if c.Token != "" {
		return c.Token
	}
	return c.Node
}

// send sends a request with the bearer cred; a failure to get an answer
// wraps ErrUnreachable.
func (c *Client) send(ctx context.Context, cred, method, target string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	hc := c.HTTP
	if hc == nil {
		hc = DefaultHTTP
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	return resp, nil
}

// do sends a request and hands a 2xx answer to out; any other answer
// becomes its Error.
func (c *Client) do(ctx context.Context, cred, method, target string, body []byte, out func(*http.Response) error) error {
	resp, err := c.send(ctx, cred, method, target, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		return out(resp)
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return answerError(resp, target, strings.TrimSpace(string(msg)))
}

// answerError is the error of a non-2xx answer with message msg: its Error
// if it carries a code, else ErrUnreachable (it did not come from this API).
func answerError(resp *http.Response, target, msg string) error {
	if e, ok := parseError(resp.Header.Get(ErrorHeader), msg); ok {
		e.Type = resp.Header.Get(ExceptionTypeHeader)
		return e
	}
	return fmt.Errorf("%w: %s answered %s: %s", ErrUnreachable, target, resp.Status, msg)
}

func (c *Client) getJSON(ctx context.Context, addr, path string, v any) error {
	return c.do(ctx, c.reader(), http.MethodGet, c.url(addr, path), nil, func(resp *http.Response) error {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			return fmt.Errorf("%w: decode %s of %s: %w", ErrUnreachable, path, addr, err)
		}
		return nil
	})
}

// Status asks the node at addr for its view of the cluster.
func (c *Client) Status(ctx context.Context, addr string) (Status, error) {
	var st Status
	err := c.getJSON(ctx, addr, StatusPath, &st)
	return st, err
}

// Hash asks the node at addr for its state hash.
func (c *Client) Hash(ctx context.Context, addr string) (StateHash, error) {
	var h StateHash
	err := c.getJSON(ctx, addr, HashPath, &h)
	return h, err
}

// TransferLeadership asks the node at addr, which must lead, to hand
// leadership to the voter to (the most up-to-date voter when empty). A
// node that does not lead answers an Error with CodeNotLeader, and the
// returned Transfer then names the leader it knows.
func (c *Client) TransferLeadership(ctx context.Context, addr, to string) (Transfer, error) {
	target := c.url(addr, TransferPath)
	if to != "" {
		target += "?to=" + url.QueryEscape(to)
	}
	cred := c.Node
	if cred == "" {
		cred = c.Token
	}
	resp, err := c.send(ctx, cred, http.MethodPost, target, nil)
	if err != nil {
		return Transfer{}, err
	}
	defer resp.Body.Close()
	// Refusals carry a Transfer too, which names the leader; a refusal
	// before the handler (no credential) carries only a message.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Transfer{}, fmt.Errorf("%w: read transfer answer of %s: %w", ErrUnreachable, addr, err)
	}
	var out Transfer
	derr := json.Unmarshal(body, &out)
	switch {
	case resp.StatusCode/100 != 2 && derr != nil:
		return Transfer{}, answerError(resp, target, strings.TrimSpace(string(body)))
	case resp.StatusCode/100 != 2:
		return out, answerError(resp, target, out.Error)
	case derr != nil:
		return out, fmt.Errorf("%w: decode transfer answer of %s: %w", ErrUnreachable, addr, derr)
	}
	return out, nil
}

// Remove asks the leader at addr to take the member id out of the cluster
// (RemovePath), with the client token or, without one, the node
// credential.
func (c *Client) Remove(ctx context.Context, addr, id string) (Removal, error) {
	var out Removal
	target := c.url(addr, RemovePath) + "?id=" + url.QueryEscape(id)
	err := c.do(ctx, c.reader(), http.MethodPost, target, nil, func(resp *http.Response) error {
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return fmt.Errorf("%w: decode removal answer of %s: %w", ErrUnreachable, addr, err)
		}
		return nil
	})
	return out, err
}

// Leave tells the node at addr, with the node credential, that it is
// being removed: it leaves gossip and stops (LeavePath).
func (c *Client) Leave(ctx context.Context, addr string) error {
	return c.do(ctx, c.Node, http.MethodPost, c.url(addr, LeavePath), nil, func(*http.Response) error { return nil })
}

// Write forwards cmd to the leader at addr and returns what applying it
// produced.
func (c *Client) Write(ctx context.Context, addr string, cmd wal.Command) (*wal.Result, error) {
	body, err := wal.Batch{Commands: []wal.Command{cmd}}.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("encode write: %w", err)
	}
	var res *wal.Result
	err = c.do(ctx, c.Node, http.MethodPost, c.url(addr, WritePath), body, func(resp *http.Response) error {
		data, err := readAll(resp.Body, resp.ContentLength)
		if err != nil {
			return fmt.Errorf("%w: read write result from %s: %w", ErrUnreachable, addr, err)
		}
		if res, err = wal.DecodeResult(data); err != nil {
			return fmt.Errorf("%w: decode write result from %s: %w", ErrUnreachable, addr, err)
		}
		return nil
	})
	return res, err
}

// Backup asks the node at addr for a backup of its database at its applied
// index and copies the DuckDB database file to w. It returns the node's
// state hash at the backup's index. An answer cut short is an error
// wrapping ErrUnreachable: what w received is then incomplete.
func (c *Client) Backup(ctx context.Context, addr string, w io.Writer) (StateHash, error) {
	target := c.url(addr, BackupPath)
	resp, err := c.send(ctx, c.reader(), http.MethodPost, target, nil)
	if err != nil {
		return StateHash{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return StateHash{}, answerError(resp, target, strings.TrimSpace(string(msg)))
	}
	var h StateHash
	idx, ierr := strconv.ParseUint(resp.Header.Get(BackupIndexHeader), 10, 64)
	rows, rerr := strconv.ParseInt(resp.Header.Get(BackupRowsHeader), 10, 64)
	h.Hash = resp.Header.Get(BackupHashHeader)
	if ierr != nil || rerr != nil || h.Hash == "" || resp.ContentLength < 0 {
		return StateHash{}, fmt.Errorf("%w: %s answered a backup without its index, hash, rows or length", ErrUnreachable, addr)
	}
	h.Index, h.Rows = idx, rows
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return h, fmt.Errorf("%w: backup from %s cut short after %d of %d bytes: %w", ErrUnreachable, addr, n, resp.ContentLength, err)
	}
	if n != resp.ContentLength {
		return h, fmt.Errorf("%w: backup from %s cut short after %d of %d bytes", ErrUnreachable, addr, n, resp.ContentLength)
	}
	return h, nil
}

// readAll reads r into one allocation when its length is known.
func readAll(r io.Reader, n int64) ([]byte, error) {
	if n > 0 && n <= MaxWriteBytes {
		buf := make([]byte, n)
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	return io.ReadAll(r)
}
