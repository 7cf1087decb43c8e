package endpoint

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/duckraft/duckraft/node/client"
)

// Gap is the unavailability one client saw of a kill at at: the time from
// its last statement that succeeded before at to its first after, from
// successes, the times its statements succeeded in order. ok is false
// when it had none on one side.
func Gap(successes []time.Time, at time.Time) (gap time.Duration, ok bool) {
	i, _ := slices.BinarySearchFunc(successes, at, time.Time.Compare)
	if i == 0 || i == len(successes) {
		return 0, false
	}
	return successes[i].Sub(successes[i-1]), true
}

// Percentile is the p-quantile (0 to 1) of sorted, nearest rank below:
// of few values, p 0.99 is the largest.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

// Codes that end a session: its client must connect again.
var sessionEnders = []string{"session_lost", "unknown_session", "session_expired", "unauthorized"}

// Code is the code of a node's error, "" for none.
func Code(err error) string {
	var se *client.ServerError
	if errors.As(err, &se) {
		return se.Code
	}
	return ""
}

// SessionEnded reports whether err ended the session: no node holds it any
// more, and its client must connect again.
func SessionEnded(err error) bool {
	return slices.Contains(sessionEnders, Code(err))
}

// FailureKey names err in a table of failures: its code, or for an error
// without one the server's message or the transport's error, shortened.
func FailureKey(err error) string {
	if code := Code(err); code != "" {
		return code
	}
	var se *client.ServerError
	if errors.As(err, &se) {
		return "no code: " + firstWords(se.Message)
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		msg = msg[i+2:]
	}
	return "transport: " + firstWords(msg)
}

// firstWords shortens a message to a key of a table of failures.
func firstWords(msg string) string {
	if i := strings.IndexAny(msg, ":\n"); i > 0 && i < 60 {
		return msg[:i]
	}
	return msg[:min(len(msg), 60)]
}
