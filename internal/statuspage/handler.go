package statuspage

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

//go:embed page.html
var page []byte

// A Handler serves a Book: GET with ?format=json (or an Accept header
// that asks for JSON and not HTML) answers the page as politestatus.Page;
// otherwise the HTML page, whose script reads the JSON at the same path
// each second. ?n= is how many keys to show (DefaultTop, MaxTop at most),
// ?q= what their names hold; ?history=0 leaves the samples out.
type Handler struct {
	// Book returns the book to read, made on the first read.
	Book func() *Book
}

// ServeHTTP answers the page.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the status page answers GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	q := r.URL.Query()
	if !wantsJSON(r) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
		w.Write(page)
		return
	}
	n := DefaultTop
	if s := q.Get("n"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			http.Error(w, "n is a number of keys, 1 or more", http.StatusBadRequest)
			return
		}
		n = v
	}
	p := h.Book().Page(time.Now(), n, q.Get("q"), q.Get("history") != "0")
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	enc.Encode(p)
}

// wantsJSON reports whether r asks for the JSON: ?format=json, or an
// Accept header that names JSON and not HTML.
func wantsJSON(r *http.Request) bool {
	switch r.URL.Query().Get("format") {
	case "json":
		return true
	case "html":
		return false
	}
	a := r.Header.Get("Accept")
	return strings.Contains(a, "application/json") && !strings.Contains(a, "text/html")
}
