package replication

import (
	"reflect"

	"github.com/hashicorp/raft"
)

// await waits for f's answer, or for raft to have shut down: then raft will
// never answer it and await returns raft.ErrRaftShutdown.
//
// Raft (v1.7.3) does not answer every future when it stops. Its FSM
// goroutine ends on shutdown without answering the committed entries still
// queued for it (fsm.go runFSM, fsmMutateCh); its leader loop ends without
// answering the entries in its apply queue (BatchApplyCh) nor the verify
// and transfer requests in their buffered channels. A future's Error waits
// on its ShutdownCh besides its answer, and raft sets that field on the
// futures it hands its own goroutines; the futures of Apply, Barrier,
// VerifyLeader, configuration changes and leadership transfer have none, so
// await gives them the Store's raftDown, closed once raft's goroutines have
// ended (Close). A waiter already blocked in Error when raft answered
// gets the answer; one that reaches Error only after raftDown closed may
// get ErrRaftShutdown even though raft answered (Error picks at random
// between two ready channels), which for an entry means "outcome unknown",
// still true. No answer comes after raftDown closes, so every goroutine
// waiting on a future ends, and Close, which waits for them, returns.
//
// The field is set before Error reads it, in the one goroutine that waits
// on f; raft's goroutines never read it. A future without the field (an
// errorFuture, answered at once) is waited on as it is.
func (s *Store) await(f raft.Future) error {
	endOn(f, s.raftDown)
	return f.Error()
}

// endOn makes f's Error end on down, unless f has no ShutdownCh field or
// already has a channel there, and reports whether it did.
func endOn(f raft.Future, down chan struct{}) bool {
	v := reflect.ValueOf(f)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return false
	}
	ch := v.Elem().FieldByName("ShutdownCh")
	if !ch.IsValid() || !ch.CanSet() || ch.Type() != reflect.TypeOf(down) || !ch.IsNil() {
		return false
	}
	ch.Set(reflect.ValueOf(down))
	return true
}
