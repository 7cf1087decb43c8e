package node

import (
	"context"
	"io"
	"net/http"
	"time"
)

// GuardBodies returns h with a deadline on reading every request's body:
// timeout from the headers' arrival, extended by one second for every rate
// bytes received. http.Server's ReadHeaderTimeout bounds the headers, but
// nothing in net/http bounds a body short of ReadTimeout, which would cut
// a large upload on a slow link as surely as a body sent a byte at a time
// (slowloris). When the deadline passes the read fails and the server
// closes the connection. The deadline is lifted once the body is read, so
// a long statement's response is not cut.
//
// Guarding twice (a cluster's mux around a Server's Handler) guards once.
func GuardBodies(h http.Handler, timeout time.Duration, rate int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Context().Value(guardedKey{}) != nil || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), guardedKey{}, true))
		g := &guardedBody{body: r.Body, rc: http.NewResponseController(w), rate: rate, deadline: time.Now().Add(timeout)}
		// The deadline holds from now even if the handler never reads the
		// body: net/http then reads what is left of it to reuse the
		// connection, and a trickled body would hold that read.
		g.rc.SetReadDeadline(g.deadline)
		r.Body = g
		h.ServeHTTP(w, r)
	})
}

type guardedKey struct{}

// guardedBody is a request body read within its deadline.
type guardedBody struct {
	body     io.ReadCloser
	rc       *http.ResponseController
	rate     int64
	deadline time.Time
	done     bool
}

func (b *guardedBody) Read(p []byte) (int, error) {
	if b.done {
		return b.body.Read(p)
	}
	// A connection that cannot take deadlines (none in net/http's
	// servers) is read without one.
	b.rc.SetReadDeadline(b.deadline)
	n, err := b.body.Read(p)
	b.deadline = b.deadline.Add(time.Duration(n) * time.Second / time.Duration(b.rate))
	switch {
	case err == io.EOF:
		b.done = true
		b.rc.SetReadDeadline(time.Time{})
	case err != nil:
		// The deadline stays, so that net/http, which reads what is left
		// of a body to reuse its connection, gives up on it at once and
		// closes the connection.
		b.done = true
	}
	return n, err
}

func (b *guardedBody) Close() error { return b.body.Close() }
