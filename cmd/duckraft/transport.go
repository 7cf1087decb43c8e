package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/client"
)

// endpoint is one server of --server and how to reach it: TLS or plain
// HTTP as the flags, DUCKRAFT_TLS or its scheme chose, or nil for the
// default (plain HTTP on a loopback host, TLS on any other).
type endpoint struct {
	// name is the server as given, for messages.
	name string
	// server is the address as node/client reads it (quack:HOST[:PORT]).
	server string
	tls    *bool
}

// schemes are the prefixes a server may carry, and the transport each
// names (nil: the default).
var schemes = []struct {
	prefix string
	tls    *bool
}{
	{"quack+https://", ptr(true)}, {"quack+https:", ptr(true)}, {"https://", ptr(true)},
	{"quack+http://", ptr(false)}, {"quack+http:", ptr(false)}, {"http://", ptr(false)},
	{"quack://", nil}, {"quack:", nil},
}

func ptr(b bool) *bool { return &b }

// parseEndpoint reads one server: quack:HOST[:PORT], quack+https: or
// quack+http: for an explicit transport, or an http(s):// URL (its path,
// /quack, dropped). force is --tls or --no-tls (or DUCKRAFT_TLS); a scheme
// saying otherwise is an error, not a silent choice of one.
func parseEndpoint(s string, force *bool) (endpoint, error) {
	ep := endpoint{name: s, tls: force}
	rest := strings.TrimSpace(s)
	for _, sc := range schemes {
		if len(rest) >= len(sc.prefix) && strings.EqualFold(rest[:len(sc.prefix)], sc.prefix) {
			rest = rest[len(sc.prefix):]
			if sc.tls != nil {
				if force != nil && *force != *sc.tls {
					return endpoint{}, fmt.Errorf("--server %q asks for %s, but %s asks for %s", s, transportName(*sc.tls), forceName(*force), transportName(*force))
				}
				ep.tls = sc.tls
			}
			break
		}
	}
	if strings.HasPrefix(s, "http") {
		rest = strings.TrimSuffix(strings.TrimSuffix(rest, "/"), "/quack")
	}
	ep.server = "quack:" + rest
	if _, err := client.ParseServer(ep.server, ep.tls); err != nil {
		return endpoint{}, fmt.Errorf("--server %q: want quack:HOST[:PORT], quack+https:HOST[:PORT] or quack+http:HOST[:PORT]: %w", s, err)
	}
	return ep, nil
}

func transportName(tls bool) string {
	if tls {
		return "TLS (HTTPS)"
	}
	return "plain HTTP"
}

func forceName(tls bool) string {
	if tls {
		return "--tls (or DUCKRAFT_TLS=true)"
	}
	return "--no-tls (or DUCKRAFT_TLS=false)"
}

// secure reports whether the connection to ep uses TLS.
func (ep endpoint) secure() bool {
	u, err := client.ParseServer(ep.server, ep.tls)
	return err == nil && strings.HasPrefix(u, "https://")
}

// hostPort is ep's HOST:PORT.
func (ep endpoint) hostPort() string {
	u, _ := client.ParseServer(ep.server, ep.tls)
	u = strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
	return strings.TrimSuffix(u, "/quack")
}

// parseTLSEnv reads DUCKRAFT_TLS: empty for the default, else a boolean.
func parseTLSEnv(v string) (*bool, error) {
	if v == "" {
		return nil, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return nil, fmt.Errorf("DUCKRAFT_TLS=%q: want true or false", v)
	}
	return &b, nil
}

// probeTimeout bounds the probe that names a transport mismatch.
const probeTimeout = 2 * time.Second

// transportMismatch turns a failure to connect to ep that comes from
// speaking the wrong transport into an error that says so and how to
// choose the other; any other error comes back as it is.
func transportMismatch(ep endpoint, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if ep.secure() {
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) || strings.Contains(msg, "server gave HTTP response to HTTPS client") {
			return fmt.Errorf("server at %s speaks plain HTTP, not TLS; use --no-tls (or quack+http:%s): %w", ep.hostPort(), ep.hostPort(), err)
		}
		return err
	}
	// A TLS server answers plain HTTP with a bare 400; ask it for a TLS
	// handshake to tell that from any other 400.
	if strings.Contains(msg, "HTTP 400") || strings.Contains(msg, "malformed HTTP response") || errors.Is(err, net.ErrClosed) {
		if speaksTLS(ep.hostPort()) {
			return fmt.Errorf("server at %s speaks TLS (HTTPS), not plain HTTP; use --tls (or quack+https:%s)", ep.hostPort(), ep.hostPort())
		}
	}
	return err
}

// speaksTLS reports whether the server at hostPort answers a TLS
// handshake. The handshake only tells whether it speaks TLS: nothing is
// sent over it, so its certificate is not checked here (the connection
// the user asked for checks it).
func speaksTLS(hostPort string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // a probe that sends nothing
	conn, err := d.DialContext(ctx, "tcp", hostPort)
	if err == nil {
		conn.Close()
		return true
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) {
		return false
	}
	// An alert (a client certificate required, say) is TLS too.
	return strings.Contains(err.Error(), "remote error: tls")
}
