package replication

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// hclogAdapter routes hashicorp/raft's hclog output to a *slog.Logger so the
// process has one logger. Level changes through hclog are ignored: the slog
// handler decides what is emitted.
type hclogAdapter struct {
	log     *slog.Logger
	name    string
	implied []any
}

func newHCLogger(l *slog.Logger, name string) hclog.Logger {
	return &hclogAdapter{log: l.With("component", name), name: name}
}

func (a *hclogAdapter) Log(level hclog.Level, msg string, args ...any) {
	var l slog.Level
	switch level {
	case hclog.Trace:
		l = slog.LevelDebug - 4
	case hclog.Debug:
		l = slog.LevelDebug
	case hclog.Warn:
		l = slog.LevelWarn
	case hclog.Error:
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	if l == slog.LevelError && msg == "failed to take snapshot" && hasError(args, raft.ErrNothingNewToSnapshot) {
		// The FSM declines a snapshot that would repeat the newest one
		// (fsm.Snapshot); nothing failed.
		l = slog.LevelDebug
	}
	a.log.Log(context.Background(), l, msg, args...)
}

// hasError reports whether hclog's key/value args hold target as a value.
func hasError(args []any, target error) bool {
	for _, v := range args {
		if err, ok := v.(error); ok && errors.Is(err, target) {
			return true
		}
	}
	return false
}

func (a *hclogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *hclogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *hclogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *hclogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *hclogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *hclogAdapter) enabled(l slog.Level) bool { return a.log.Enabled(context.Background(), l) }

func (a *hclogAdapter) IsTrace() bool { return a.enabled(slog.LevelDebug - 4) }
func (a *hclogAdapter) IsDebug() bool { return a.enabled(slog.LevelDebug) }
func (a *hclogAdapter) IsInfo() bool  { return a.enabled(slog.LevelInfo) }
func (a *hclogAdapter) IsWarn() bool  { return a.enabled(slog.LevelWarn) }
func (a *hclogAdapter) IsError() bool { return a.enabled(slog.LevelError) }

func (a *hclogAdapter) ImpliedArgs() []any { return a.implied }

func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return &hclogAdapter{log: a.log.With(args...), name: a.name, implied: append(a.implied[:len(a.implied):len(a.implied)], args...)}
}

func (a *hclogAdapter) Name() string { return a.name }

func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return a.ResetNamed(name)
}

func (a *hclogAdapter) ResetNamed(name string) hclog.Logger {
	return &hclogAdapter{log: a.log.With("component", name), name: name, implied: a.implied}
}

func (a *hclogAdapter) SetLevel(hclog.Level) {}

func (a *hclogAdapter) GetLevel() hclog.Level {
	switch {
	case a.IsTrace():
		return hclog.Trace
	case a.IsDebug():
		return hclog.Debug
	case a.IsInfo():
		return hclog.Info
	case a.IsWarn():
		return hclog.Warn
	}
	return hclog.Error
}

func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *hclogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		a.Info(strings.TrimRight(string(p), "\n"))
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
