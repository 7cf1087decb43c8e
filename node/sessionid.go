package node

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/duckraft/duckraft/node/tokens"
	"github.com/duckraft/duckraft/node/wire"
)

// SessionIDs mints and checks the session ids of a cluster's nodes. An id
// says which node opened the session, in which run of that node (its boot
// id, so a restarted node knows the sessions of its earlier run from its
// own), the role and Quack generation the session opened with, and carries
// a MAC under a key every member derives from the cluster key
// (clusterkey.SessionID). Any member can so tell from the id alone where a
// session started and what it may do; a client cannot forge an id or
// change what one says (a higher role, another node) without the key.
//
// The id is the owner's node id, when it is made of letters, digits, '-'
// and '_' (else "x"), a dot, and the payload and MAC in upper-case hex:
// "n1.01030212…". The readable prefix lets a load balancer key on the
// node that opened a session; it is checked against the signed payload.
type SessionIDs struct {
	node string
	boot uint64
	key  []byte
}

// SessionClaims is what a signed session id says.
type SessionClaims struct {
	ID string
	// Owner is the node that opened the session, Boot that node's run.
	Owner string
	Boot  uint64
	Role  tokens.Role
	Gen   wire.Generation
}

// ErrBadSessionID marks an id that no member signed: not one of this
// cluster's, altered, or malformed.
var ErrBadSessionID = errors.New("not a session id of this cluster")

const (
	sessionIDVersion = 1
	sessionMACBytes  = 16
	sessionRandBytes = 12
	// fixed part of the payload: version, role, generation, boot, random.
	sessionFixedBytes = 3 + 8 + sessionRandBytes
	maxOwnerBytes     = 255
)

// NewSessionIDs returns the ids of node, signed with key (32 bytes from
// clusterkey.SessionID); each call is a new run of the node, with a boot
// id of its own.
func NewSessionIDs(node string, key []byte) *SessionIDs {
	var b [8]byte
	rand.Read(b[:])
	return &SessionIDs{node: node, boot: binary.BigEndian.Uint64(b[:]), key: key}
}

// Node is the id of the node that mints these ids.
func (k *SessionIDs) Node() string { return k.node }

// Boot identifies this run of the node.
func (k *SessionIDs) Boot() uint64 { return k.boot }

// New returns a fresh id for a session of role in generation g opened
// on this node.
func (k *SessionIDs) New(g wire.Generation, role tokens.Role) string {
	owner := k.node
	if len(owner) > maxOwnerBytes {
		owner = owner[:maxOwnerBytes]
	}
	p := make([]byte, 0, sessionFixedBytes+len(owner)+sessionMACBytes)
	p = append(p, sessionIDVersion, byte(role), byte(g))
	p = binary.BigEndian.AppendUint64(p, k.boot)
	var r [sessionRandBytes]byte
	rand.Read(r[:])
	p = append(p, r[:]...)
	p = append(p, owner...)
	p = append(p, k.mac(p)...)
	return ownerLabel(owner) + "." + strings.ToUpper(hex.EncodeToString(p))
}

// Parse checks id's MAC and returns what it says; an id this cluster did
// not sign is ErrBadSessionID.
func (k *SessionIDs) Parse(id string) (SessionClaims, error) {
	label, enc, ok := strings.Cut(id, ".")
	if !ok || len(enc) > 2*(sessionFixedBytes+maxOwnerBytes+sessionMACBytes) {
		return SessionClaims{}, ErrBadSessionID
	}
	p, err := hex.DecodeString(enc)
	if err != nil || len(p) < sessionFixedBytes+1+sessionMACBytes {
		return SessionClaims{}, ErrBadSessionID
	}
	body, mac := p[:len(p)-sessionMACBytes], p[len(p)-sessionMACBytes:]
	if !hmac.Equal(mac, k.mac(body)) {
		return SessionClaims{}, ErrBadSessionID
	}
	c := SessionClaims{ID: id, Role: tokens.Role(body[1]), Gen: wire.Generation(body[2]),
		Boot: binary.BigEndian.Uint64(body[3:11]), Owner: string(body[sessionFixedBytes:])}
	// Signed by a member, so these hold unless a later version minted it.
	if body[0] != sessionIDVersion || c.Role < tokens.Read || c.Role > tokens.Admin ||
		(c.Gen != wire.Q1 && c.Gen != wire.Q3) || label != ownerLabel(c.Owner) {
		return SessionClaims{}, fmt.Errorf("%w: version %d, role %d, generation %d", ErrBadSessionID, body[0], body[1], body[2])
	}
	return c, nil
}

// mac is the MAC of payload p.
func (k *SessionIDs) mac(p []byte) []byte {
	h := hmac.New(sha256.New, k.key)
	h.Write(p)
	return h.Sum(nil)[:sessionMACBytes]
}

var plainNodeID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ownerLabel is the readable prefix of an id: the owner's node id when it
// needs no quoting anywhere (cookies, headers, balancer rules), else "x".
func ownerLabel(owner string) string {
	if plainNodeID.MatchString(owner) {
		return owner
	}
	return "x"
}
