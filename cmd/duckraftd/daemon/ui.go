package daemon

import (
	"embed"
	"io/fs"
	"net/http"
)

// ui is the status page: static HTML, CSS and JavaScript with no data in
// them. The page fetches /status with the token the user gives it (a form,
// or ?token= once, kept in the tab's sessionStorage), so serving it to
// anyone shows them nothing of the cluster (docs/operations.md).
//
//go:embed ui
var ui embed.FS

// uiHandler serves the page at / and its files under /ui/, with headers
// that keep it from being framed, from loading anything from elsewhere, and
// from sending the address (which may hold ?token=) as a referrer.
func uiHandler() http.Handler {
	files, err := fs.Sub(ui, "ui")
	if err != nil {
		panic(err) // the embedded directory exists at build time
	}
	static := http.FileServerFS(files)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, files, "index.html")
	})
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", static))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		mux.ServeHTTP(w, r)
	})
}
