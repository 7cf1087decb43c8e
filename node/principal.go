package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
)

// PrincipalHeader names, on a member's request, the client whose statement
// the request carries (a read routed to this node): the principal the
// member's server gave that client. The statement then takes its turn
// (admission.go) as that client's. It is believed only on a member's
// request (Config.MemberCredential); a client's is ignored.
const PrincipalHeader = "Duckraft-Principal"

// maxPrincipalBytes bounds a principal a member names: it is a map key
// for as long as its statements hold or await a turn.
const maxPrincipalBytes = 256

// principalKey carries, in a statement's context, the client it counts
// for.
type principalKey struct{}

// withPrincipal returns ctx naming p as the statement's client.
func withPrincipal(ctx context.Context, p string) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// principalOf returns the client ctx names; "" when none (one client for
// all that name none).
func principalOf(ctx context.Context) string {
	p, _ := ctx.Value(principalKey{}).(string)
	return p
}

// Principal returns the client a statement's context counts for: routing
// passes it on to the node a read is routed to (PrincipalHeader).
func Principal(ctx context.Context) string { return principalOf(ctx) }

// clientPrincipal names the client of credential auth at address host: a
// client is a token from an address, so that clients sharing a token are
// told apart by address, and clients behind one address by token. Every
// node names a client alike, so a client's reads routed from other nodes
// count with those it sends here itself. The token appears as 16 bytes of
// its SHA-256, in hex, under a label of its own: a principal goes to
// other members (who hold the tokens anyway) and into no log or metric.
func clientPrincipal(auth, host string) string {
	d := sha256.Sum256([]byte("duckraft client principal\x00" + auth))
	return hex.EncodeToString(d[:16]) + "@" + host
}

// statementPrincipal is the client a statement of sess counts for: a
// client session's own, or on a member's session the client its request
// names (PrincipalHeader), else the member's session itself.
func statementPrincipal(sess *Session, h http.Header) string {
	if sess.member {
		if p := h.Get(PrincipalHeader); p != "" && len(p) <= maxPrincipalBytes {
			return p
		}
	}
	return sess.principal
}
