package dashboard

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

// assets are the page's files, built into the binary: the page fetches
// nothing from anywhere else.
//
//go:embed static
var assets embed.FS

// staticHandler serves the page at / and its files under /static/.
func staticHandler() http.Handler {
	sub, err := fs.Sub(assets, "static")
	if err != nil {
		panic(err) // the embedded directory exists at build time
	}
	files := http.FileServer(http.FS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/":
			http.ServeFileFS(w, r, sub, "index.html")
		case strings.HasPrefix(r.URL.Path, "/static/"):
			http.StripPrefix("/static", files).ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}
