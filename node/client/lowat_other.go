//go:build !linux

package client

import (
	"context"
	"net"
)

const readBufferSize = 4 << 10

// dialer returns the Transport's DialContext for plain HTTP connections:
// the default one outside Linux (lowat_linux.go).
func dialer() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return (&net.Dialer{}).DialContext
}
