package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/duckraft/duckraft/cmd/internal/clusterctl"
)

// globals are the flags every subcommand accepts, before or after its
// name: `duckraft --server X status` and `duckraft status --server X` are
// one command.
type globals struct {
	// endpoints are the servers with their transport; the first is the
	// one every command but the shell talks to, and the shell fails over
	// from one to the next (link.go).
	endpoints []endpoint
	servers   clusterctl.Servers
	token     string
	format    string
	protocol  int
	// useTLS and noTLS are --tls and --no-tls.
	useTLS, noTLS bool
}

// register defines the global flags on fs. No default shows a secret:
// --help prints the defaults, so the token's comes from DUCKRAFT_TOKEN
// after parsing (resolve), not as the flag's default.
func (g *globals) register(fs *flag.FlagSet) {
	g.servers = clusterctl.NewServers(envOr("DUCKRAFT_SERVER", "quack:127.0.0.1:9494"))
	fs.Var(&g.servers, "server", "server as quack:HOST[:PORT] (quack+https: or quack+http: to choose the transport); several, separated by commas, for the shell to fail over between (env DUCKRAFT_SERVER)")
	fs.StringVar(&g.token, "token", "", "authentication token (default: env DUCKRAFT_TOKEN)")
	fs.StringVar(&g.format, "format", "duckbox", "output format: "+strings.Join(modes, ", "))
	fs.IntVar(&g.protocol, "protocol", 0, "Quack generation to speak: 1 or 3 (0: negotiate)")
	fs.BoolVar(&g.useTLS, "tls", false, "connect with TLS (HTTPS) whatever the host (env DUCKRAFT_TLS=true); by default plain HTTP on a loopback host, TLS on any other")
	fs.BoolVar(&g.noTLS, "no-tls", false, "connect with plain HTTP whatever the host (env DUCKRAFT_TLS=false)")
}

// resolve completes the globals after parsing: the token from the
// environment, the transport and each server's endpoint.
func (g *globals) resolve() error {
	if g.token == "" {
		g.token = os.Getenv("DUCKRAFT_TOKEN")
	}
	force, err := parseTLSEnv(os.Getenv("DUCKRAFT_TLS"))
	if err != nil {
		return err
	}
	switch {
	case g.useTLS && g.noTLS:
		return errors.New("--tls and --no-tls contradict each other")
	case g.useTLS:
		force = ptr(true)
	case g.noTLS:
		force = ptr(false)
	}
	servers := g.servers.List()
	if len(servers) == 0 {
		return errors.New("DUCKRAFT_SERVER names no server; give --server")
	}
	for _, s := range servers {
		ep, err := parseEndpoint(s, force)
		if err != nil {
			return err
		}
		g.endpoints = append(g.endpoints, ep)
	}
	return nil
}

// valueFlags are the flags, of any command, that take a value as the next
// argument when written without "=": splitCommand skips those values while
// it looks for the subcommand's name.
var valueFlags = []string{"server", "token", "format", "protocol", "c", "cluster-key", "to"}

// splitCommand finds the subcommand among args, whichever flags come
// before it, and returns its name and the other arguments in order. name is
// empty when the first positional argument is not a command (the shell's
// parse then reports it) or there is none.
func splitCommand(args []string, commands []string) (name string, rest []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return "", args
		case strings.HasPrefix(a, "-") && a != "-":
			n := strings.TrimLeft(a, "-")
			if !strings.Contains(n, "=") && slices.Contains(valueFlags, n) {
				i++
			}
		case slices.Contains(commands, a):
			return a, append(slices.Clone(args[:i]), args[i+1:]...)
		default:
			return "", args
		}
	}
	return "", args
}

// parseCommand parses the arguments of command cmd: the global flags, the
// command's own (extra defines them), and positional arguments, in any
// order; "--" ends the flags. It returns the globals and the positional
// arguments, or a nil globals and the exit status after it reported the
// error (0 for --help).
func parseCommand(cmd string, args []string, stderr io.Writer, usage string, extra func(*flag.FlagSet)) (*globals, []string, int) {
	name := "duckraft"
	if cmd != "" {
		name += " " + cmd
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	g := &globals{}
	g.register(fs)
	if extra != nil {
		extra(fs)
	}
	pos, err := parseInterleaved(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil, nil, 0
	}
	if err != nil {
		return nil, nil, 2
	}
	if err := g.resolve(); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return nil, nil, 2
	}
	return g, pos, 0
}

// parseInterleaved parses args with fs, letting flags follow positional
// arguments, which Go's flag package stops at.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
