// Package cluster finds duckraft nodes with gossip (hashicorp/memberlist), spreads each
// node's metadata, notices failures, and keeps the Raft configuration in line with the
// live members.
package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// MetaMaxSize is memberlist's limit on a node's metadata; Encode refuses anything larger.
const MetaMaxSize = 512

// metaVersion is the first byte of an encoded Meta. Versions only ever append fields, so a
// decoder reads the fields it knows and ignores the rest; version 2 appended Engine,
// version 3 HTTPAddr, and older versions still decode, with those fields empty.
const (
	metaVersion    = 3
	minMetaVersion = 1
)

// Errors returned by DecodeMeta and Meta.Encode.
var (
	ErrMetaTooLarge = errors.New("cluster: node metadata larger than 512 bytes")
	ErrMetaVersion  = errors.New("cluster: unknown node metadata version")
	ErrMetaCorrupt  = errors.New("cluster: corrupt node metadata")
)

// Role is the role a node asks for. RoleVoter nodes vote while the cluster has fewer than
// its target number of voters; RoleReplica nodes (started with --replica) never vote.
type Role uint8

const (
	RoleVoter Role = iota
	RoleReplica
)

func (r Role) String() string {
	switch r {
	case RoleVoter:
		return "voter"
	case RoleReplica:
		return "replica"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Meta is what a node gossips about itself.
type Meta struct {
	ID           string
	Role         Role
	RaftAddr     string // exactly as in the Raft configuration; a different string reads as a move
	QuackAddr    string
	AppliedIndex uint64 // last Raft index applied to this node's DuckDB
	Load         uint64 // open sessions plus in-flight requests, for routing
	Leader       bool   // this node is the Raft leader
	LeaderID     string // the leader this node knows of, "" if none
	Leaving      bool   // the node is leaving gracefully (Gossip.Leave)
	// Engine is the DuckDB version the node embeds ("v2.0.0"); "" from a
	// build that did not gossip it (version 1 metadata: DuckDB 1.5.6).
	Engine string
	// Staging is set by builds that apply wal's staging entries (Stage,
	// Staged, Unstage). An older build cannot decode them and would skip
	// the entries, so no node stages a transaction unless every live data
	// node sets it. A flag bit: older decoders ignore bits they do not know.
	Staging bool
	// CompressedSnapshots is set by builds that read snapshots whose row
	// chunks are zstd-compressed frames (replication's frameZstd). An
	// older build refuses such a snapshot as an unknown frame, so a node
	// compresses its snapshots only while every server of the Raft
	// configuration sets it. A flag bit, as Staging.
	CompressedSnapshots bool
	// HTTPAddr is the node's operations address (duckraftd --http) as
	// others reach it, so that a status page links to every member's;
	// "" when it serves none, or from a build before version 3.
	HTTPAddr string
}

const (
	flagLeader  = 1 << 0
	flagReplica = 1 << 1
	flagLeaving = 1 << 2
	flagStaging = 1 << 3
	// flagCompressedSnapshots is Meta.CompressedSnapshots.
	flagCompressedSnapshots = 1 << 4
)

// Encode returns the compact binary form of m: version, flags, applied index and load as
// uvarints, then ID, RaftAddr, QuackAddr, LeaderID, (version 2) Engine and (version 3)
// HTTPAddr as uvarint-length-prefixed strings.
func (m Meta) Encode() ([]byte, error) {
	b := make([]byte, 0, 2+2*binary.MaxVarintLen64+5+len(m.ID)+len(m.RaftAddr)+len(m.QuackAddr)+len(m.LeaderID)+len(m.Engine)+len(m.HTTPAddr))
	var flags byte
	if m.Leader {
		flags |= flagLeader
	}
	if m.Leaving {
		flags |= flagLeaving
	}
	if m.Staging {
		flags |= flagStaging
	}
	if m.CompressedSnapshots {
		flags |= flagCompressedSnapshots
	}
	switch m.Role {
	case RoleVoter:
	case RoleReplica:
		flags |= flagReplica
	default:
		return nil, fmt.Errorf("cluster: encode meta: invalid %v", m.Role)
	}
	b = append(b, metaVersion, flags)
	b = binary.AppendUvarint(b, m.AppliedIndex)
	b = binary.AppendUvarint(b, m.Load)
	for _, s := range []string{m.ID, m.RaftAddr, m.QuackAddr, m.LeaderID, m.Engine, m.HTTPAddr} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	if len(b) > MetaMaxSize {
		return nil, fmt.Errorf("%w: %d bytes", ErrMetaTooLarge, len(b))
	}
	return b, nil
}

// DecodeMeta parses what Encode produced. It never panics on arbitrary input.
func DecodeMeta(b []byte) (Meta, error) {
	var m Meta
	if len(b) < 2 {
		return m, fmt.Errorf("%w: %d bytes", ErrMetaCorrupt, len(b))
	}
	if b[0] < minMetaVersion {
		return m, fmt.Errorf("%w: %d", ErrMetaVersion, b[0])
	}
	flags := b[1]
	m.Leader = flags&flagLeader != 0
	m.Leaving = flags&flagLeaving != 0
	m.Staging = flags&flagStaging != 0
	m.CompressedSnapshots = flags&flagCompressedSnapshots != 0
	if flags&flagReplica != 0 {
		m.Role = RoleReplica
	}
	d := decoder{b: b[2:]}
	m.AppliedIndex = d.uvarint()
	m.Load = d.uvarint()
	m.ID = d.string()
	m.RaftAddr = d.string()
	m.QuackAddr = d.string()
	m.LeaderID = d.string()
	if b[0] >= 2 {
		m.Engine = d.string()
	}
	if b[0] >= 3 {
		m.HTTPAddr = d.string()
	}
	if d.err {
		return Meta{}, ErrMetaCorrupt
	}
	return m, nil
}

// decoder reads fields in order and remembers the first failure, so callers check once.
type decoder struct {
	b   []byte
	err bool
}

func (d *decoder) uvarint() uint64 {
	if d.err {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if d.err || n > uint64(len(d.b)) {
		d.err = true
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
