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
	"github.com/duckraft/duckraft/node/outcome"
	"github.com/duckraft/duckraft/node/sqlquote"
	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

// ErrAuthentication and ErrAuthorization carry the texts DuckDB's own Quack
// server uses, so clients show the same messages. ErrAuthentication is
// outcome.ErrUnauthorized, answered with its code.
var (
	ErrAuthentication = outcome.ErrUnauthorized
	ErrAuthorization  = errors.New("Authorization failed")
)

// An Authenticator decides whether a CONNECTION_REQUEST may open a session,
// and with which role. The server asks again, with the same authString, on
// every later request of the session: a token removed since (a tokens file
// reloaded) ends the session at its next request, and a changed role
// applies from that request on.
type Authenticator interface {
	Authenticate(ctx context.Context, sessionID, authString string) (tokens.Role, error)
}

// An Authorizer decides whether a session may run a statement. It may return
// a replacement for the SQL text, or "" to run the text unchanged.
type Authorizer interface {
	Authorize(ctx context.Context, sessionID, sql string) (rewrite string, err error)
}

// TokenAuth accepts exactly one token, compared in constant time, as
// tokens.Admin.
type TokenAuth struct{ Token string }

// Authenticate implements Authenticator.
func (a TokenAuth) Authenticate(_ context.Context, _ string, authString string) (tokens.Role, error) {
	if subtle.ConstantTimeCompare([]byte(a.Token), []byte(authString)) != 1 {
		return 0, ErrAuthentication
	}
	return tokens.Admin, nil
}

// KeyringAuth accepts the tokens of the Keyring's Set in force, each with
// its role.
type KeyringAuth struct{ Keyring *tokens.Keyring }

// Authenticate implements Authenticator.
func (a KeyringAuth) Authenticate(_ context.Context, _ string, authString string) (tokens.Role, error) {
	role, ok := a.Keyring.Role(authString)
	if !ok {
		return 0, ErrAuthentication
	}
	return role, nil
}

// ErrPermission marks a request that the session's role does not allow
// (PermissionError); callers test for it with errors.Is. It is
// outcome.ErrForbidden, so it is answered with the code forbidden.
var ErrPermission = outcome.ErrForbidden

// PermissionError refuses what a session's role does not allow. Its text
// is in DuckDB's "Permission Error: …" form, so a DuckDB client raises a
// PermissionException, and its code (forbidden) goes in the
// answer's header.
type PermissionError struct {
	// What names the refused request: a statement's text, "APPEND to
	// s.t", …
	What string
	Have tokens.Role
	Need tokens.Role
}

func (e *PermissionError) Error() string {
	return fmt.Sprintf("Permission Error: %s needs the %s role; this session's token has the %s role", e.What, e.Need, e.Have)
}

// Is makes errors.Is(err, ErrPermission) hold.
func (e *PermissionError) Is(target error) bool { return target == ErrPermission }

// Require returns a PermissionError for what unless the session's role
// allows need.
func (s *Session) Require(need tokens.Role, what string) error {
	if have := s.Role(); !have.Allows(need) {
		return &PermissionError{What: what, Have: have, Need: need}
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
