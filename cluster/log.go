package cluster

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// newStdLogger adapts memberlist's *log.Logger output ("[WARN] memberlist: msg") to l,
// mapping memberlist's level prefixes to slog levels.
func newStdLogger(l *slog.Logger) *log.Logger {
	return log.New(slogWriter{l}, "", 0)
}

type slogWriter struct{ l *slog.Logger }

var levelPrefixes = []struct {
	prefix []byte
	level  slog.Level
}{
	{[]byte("[DEBUG] "), slog.LevelDebug},
	{[]byte("[INFO] "), slog.LevelInfo},
	{[]byte("[WARN] "), slog.LevelWarn},
	{[]byte("[ERR] "), slog.LevelError},
	{[]byte("[ERROR] "), slog.LevelError},
}

func (w slogWriter) Write(p []byte) (int, error) {
	msg := bytes.TrimRight(p, "\n")
	level := slog.LevelInfo
	for _, lp := range levelPrefixes {
		if bytes.HasPrefix(msg, lp.prefix) {
			level, msg = lp.level, msg[len(lp.prefix):]
			break
		}
	}
	msg = bytes.TrimPrefix(msg, []byte("memberlist: "))
	if w.l.Enabled(context.Background(), level) {
		w.l.Log(context.Background(), level, string(msg))
	}
	return len(p), nil
}
