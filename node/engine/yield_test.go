package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestInterruptClientsStopsOnlyClients runs a long scan on a client
// connection and one on a node connection, interrupts the clients, and
// checks that the client's scan fails with the cause while the node's
// goes on, and that clients start nothing until released.
func TestInterruptClientsStopsOnlyClients(t *testing.T) {
	db := openTest(t)
	client, err := db.ConnectClient()
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	own, err := db.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	cause := errors.New("the node needs its memory")
	const scan = "SELECT sum(hash(i)) FROM range(100000000000) r(i)"
	clientDone := make(chan error, 1)
	go func() {
		_, err := client.Exec(context.Background(), scan)
		clientDone <- err
	}()
	ctx, cancel := context.WithCancel(context.Background())
	ownDone := make(chan error, 1)
	go func() {
		_, err := own.Exec(ctx, scan)
		ownDone <- err
	}()
	// Interrupt until the client's scan has started and stopped: the
	// call does nothing while the connection is idle.
	var got error
	for got == nil {
		db.InterruptClients(cause)
		select {
		case got = <-clientDone:
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !errors.Is(got, cause) || !IsInterrupt(got) || !strings.Contains(got.Error(), cause.Error()) {
		t.Fatalf("client scan: %v; want an interrupt naming %q", got, cause)
	}
	select {
	case err := <-ownDone:
		t.Fatalf("the node's scan ended: %v", err)
	default:
	}
	cancel()
	if err := <-ownDone; err == nil || errors.Is(err, cause) {
		t.Fatalf("node scan after cancel: %v", err)
	}
	// Held: the client connection starts nothing until released.
	if _, err := client.Exec(context.Background(), "SELECT 42"); !errors.Is(err, cause) {
		t.Fatalf("statement while held: %v, want the cause", err)
	}
	if _, err := own.Exec(context.Background(), "SELECT 42"); err != nil {
		t.Fatalf("node statement while clients are held: %v", err)
	}
	db.ReleaseClients()
	if _, err := client.Exec(context.Background(), "SELECT 42"); err != nil {
		t.Fatalf("next statement: %v", err)
	}
	if n := db.InterruptClients(cause); n != 0 {
		t.Fatalf("interrupted %d idle connections", n)
	}
}
