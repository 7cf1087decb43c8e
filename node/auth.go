package node

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/duckraft/duckraft/node/engine"
	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/wire"
)

// ErrAuthentication and ErrAuthorization carry the texts DuckDB's own Quack
// server uses, so clients show the same messages.
var (
	ErrAuthentication = errors.New("Authentication failed")
	ErrAuthorization  = errors.New("Authorization failed")
)

// An Authenticator decides whether a CONNECTION_REQUEST may open a session.
type Authenticator interface {
	Authenticate(ctx context.Context, sessionID, authString string) error
}

// An Authorizer decides whether a session may run a statement. It may return
// a replacement for the SQL text, or "" to run the text unchanged.
type Authorizer interface {
	Authorize(ctx context.Context, sessionID, sql string) (rewrite string, err error)
}

// TokenAuth accepts exactly one token, compared in constant time.
type TokenAuth struct{ Token string }

// Authenticate implements Authenticator.
func (a TokenAuth) Authenticate(_ context.Context, _ string, authString string) error {
	if subtle.ConstantTimeCompare([]byte(a.Token), []byte(authString)) != 1 {
		return ErrAuthentication
	}
	return nil
}

// AllowAll authorizes every statement unchanged.
type AllowAll struct{}

// Authorize implements Authorizer.
func (AllowAll) Authorize(context.Context, string, string) (string, error) { return "", nil }

// SQLAuthorizer calls a SQL macro or function as fn(session_id, sql) on a
// fresh connection, the way the quack extension's quack_authorization_function
// works: an error, no row, NULL or false denies; a VARCHAR result replaces the
// statement; anything else admits it.
type SQLAuthorizer struct {
	DB       *engine.DB
	Function string
}

// Authorize implements Authorizer.
func (a SQLAuthorizer) Authorize(ctx context.Context, sessionID, sql string) (string, error) {
	conn, err := a.DB.Connect()
	if err != nil {
		return "", fmt.Errorf("authorize: %w", err)
	}
	defer conn.Close()
	q := fmt.Sprintf("SELECT %s(%s, %s)", a.Function, sqlquote.Literal(sessionID), sqlquote.Literal(sql))
	res, err := conn.Query(ctx, q)
	if err != nil {
		return "", fmt.Errorf("%w: %s", ErrAuthorization, engine.RawMessage(err))
	}
	defer res.Close()
	chunk, err := res.Next()
	if err != nil || chunk == nil || chunk.Rows == 0 || len(chunk.Columns) == 0 {
		return "", ErrAuthorization
	}
	v, err := chunk.Columns[0].Value(0)
	if err != nil {
		return "", ErrAuthorization
	}
	switch v := v.(type) {
	case nil:
		return "", ErrAuthorization
	case bool:
		if !v {
			return "", ErrAuthorization
		}
		return "", nil
	case string:
		if chunk.Columns[0].Type.ID == wire.TypeVarchar {
			return v, nil
		}
	}
	return "", nil
}

// NewToken returns a random token: 16 bytes from a CSPRNG as 32 upper-case
// hex digits, like DuckDB's quack_serve.
func NewToken() string {
	var b [16]byte
	rand.Read(b[:]) // never fails since Go 1.24
	return strings.ToUpper(hex.EncodeToString(b[:]))
}
