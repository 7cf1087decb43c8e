package daemon

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/duckraft/duckraft/cluster"
	"github.com/duckraft/duckraft/replication"
	"github.com/duckraft/duckraft/routing"
	"github.com/duckraft/duckraft/routing/nodeapi"
)

// ErrRemoved is why a daemon stopped serving when the leader removed it
// from the cluster (nodeapi.RemovePath): Err returns it, and duckraftd
// exits cleanly on it, so that a service manager does not start the node
// again to rejoin.
var ErrRemoved = errors.New("removed from the cluster by the leader")

// ErrApplierHalted is why a daemon stopped serving when its applier met an
// error this process cannot recover from (DuckDB invalidated the
// database): duckraftd restarts itself on it, which reopens DuckDB and
// replays the log from the last entry applied.
var ErrApplierHalted = errors.New("the applier halted")

// applierHalted is replication.Config.OnHalt: the node stops serving, as
// on a removal, and its owner restarts it (Err wraps ErrApplierHalted).
func (d *Daemon) applierHalted(err error) {
	if !d.halt.CompareAndSwap(nil, &err) {
		return
	}
	d.log.Error("the applier halted: stopping so that the node restarts and replays the log", "err", err)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.hs.Shutdown(ctx)
	}()
}

// goneWait bounds how long the leader waits for gossip to see a member it
// told to leave as gone: the leave message spreads in well under a second,
// and failure detection takes a few on a LAN.
const goneWait = 15 * time.Second

// removeMember takes the member id out of the cluster, on the leader.
//
// The reconciler adds every live gossip member that is not in the Raft
// configuration, so removing a running node from Raft alone would last
// until its next pass. The node is therefore told to leave first: it
// leaves gossip and stops (leaveCluster), and only once gossip sees it gone
// does the leader remove it from Raft; a member gossip already saw dead or
// gone is removed at once. Either way no reconciler adds it back, since
// they only add live members, until the node is started again, which is
// then a rejoin like any other.
func (d *Daemon) removeMember(ctx context.Context, id string) (nodeapi.Removal, error) {
	self := d.store.ID()
	out := nodeapi.Removal{ID: id, LeaderID: self}
	if !d.store.IsLeader() {
		return out, nodeapi.Errorf(nodeapi.CodeNotLeader, "%s does not lead; the leader is %q", self, d.store.LeaderID())
	}
	if id == self {
		return out, nodeapi.Errorf(nodeapi.CodeBadRequest, "%s is the leader: move leadership away first (duckraft transfer-leader), then remove it", id)
	}
	conf, err := d.store.Configuration()
	if err != nil {
		return out, err
	}
	i := slices.IndexFunc(conf, func(s replication.Server) bool { return s.ID == id })
	if i < 0 {
		return out, nodeapi.Errorf(nodeapi.CodeNoSuchMember, "no member %q in the Raft configuration", id)
	}
	if conf[i].Voter {
		if err := d.safeToRemove(conf, id); err != nil {
			return out, err
		}
	}
	if mem, ok := d.members.member(id); ok && live(mem) {
		if mem.Meta.QuackAddr == "" {
			return out, nodeapi.Errorf(nodeapi.CodeBadRequest, "%s gossips no Quack address to tell it to leave; stop it, then remove it", id)
		}
		if err := d.peerAPI().Leave(ctx, mem.Meta.QuackAddr); err != nil {
			return out, nodeapi.Errorf(nodeapi.CodeBadRequest, "%s could not be told to leave (%v): removed from Raft while it runs, it would be added back; stop it, then remove it", id, err)
		}
		out.Left = true
		if err := d.waitGone(ctx, id); err != nil {
			return out, err
		}
	}
	if err := d.store.Remove(id); err != nil {
		return out, routing.APIError(err)
	}
	d.log.Info("member removed", "server", id, "left", out.Left)
	return out, nil
}

// safeToRemove refuses to remove voter id when the voters left, counting
// only those gossip sees alive at the address Raft has for them, would not
// be a majority of the new voter set: that configuration could not commit
// anything, its own change included, and the cluster would stall. The
// reconciler applies the same rule to its own removals (cluster/DESIGN.md).
func (d *Daemon) safeToRemove(conf []replication.Server, id string) error {
	self := d.store.ID()
	remaining, alive := 0, 0
	for _, s := range conf {
		if !s.Voter || s.ID == id {
			continue
		}
		remaining++
		if mem, ok := d.members.member(s.ID); s.ID == self || ok && mem.State == cluster.StateAlive && mem.Meta.RaftAddr == s.Addr {
			alive++
		}
	}
	if alive > remaining/2 {
		return nil
	}
	return nodeapi.Errorf(nodeapi.CodeBadRequest, "removing voter %s would leave %d voters of which only %d are alive, not a majority: bring the others back (or remove the dead ones) first", id, remaining, alive)
}

// live reports whether gossip sees mem as running: not dead, not gone.
func live(mem cluster.Member) bool {
	return mem.State != cluster.StateDead && mem.State != cluster.StateLeft
}

// waitGone waits until gossip no longer sees member id as live.
func (d *Daemon) waitGone(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, goneWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if mem, ok := d.members.member(id); !ok || !live(mem) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nodeapi.Errorf(nodeapi.CodeBadRequest, "%s was told to leave but gossip still sees it after %s; not removed", id, goneWait)
		case <-tick.C:
		}
	}
}

// peerAPI calls the other members' node API with the node credential.
func (d *Daemon) peerAPI() *nodeapi.Client {
	c := &nodeapi.Client{Node: d.nodeCred}
	if d.peerTLS != nil {
		c.TLS = true
		c.HTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: d.peerTLS}}
	}
	return c
}

// leaveCluster is this node's part of its removal, asked by the leader: it
// leaves gossip, so the others see it gone rather than failed, and stops
// serving; Done is then closed and Err is ErrRemoved. The owner of the
// daemon closes it as after any stop.
func (d *Daemon) leaveCluster() {
	if !d.removed.CompareAndSwap(false, true) {
		return
	}
	d.log.Warn("the leader removes this node from the cluster: leaving gossip and stopping")
	if err := d.members.gossip.Leave(time.Second); err != nil {
		d.log.Warn("gossip leave", "err", err)
	}
	go func() {
		// Answers in flight, the leader's among them, finish first.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.hs.Shutdown(ctx)
	}()
}
