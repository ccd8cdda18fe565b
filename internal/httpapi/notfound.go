package httpapi

import (
	"net/http"
	"strings"
)

// jsonMisses answers a /v1 request that matches no endpoint, or names one
// with another method, with the API's error body ({"error": why}) instead
// of the mux's text/plain: a client of the API parses one kind of error.
// Other paths (the status page, /metrics) keep the mux's answers.
func jsonMisses(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern != "" || !strings.HasPrefix(r.URL.Path, "/v1/") {
			mux.ServeHTTP(w, r)
			return
		}
		// The mux's own miss handler says which miss it is (404, or 405
		// with the Allow header); only its body is replaced.
		c := &missCapture{header: http.Header{}}
		h.ServeHTTP(c, r)
		switch c.code {
		case http.StatusMethodNotAllowed:
			w.Header().Set("Allow", c.header.Get("Allow"))
			writeErr(w, c.code, r.Method+" is not allowed on "+r.URL.Path+" (allowed: "+c.header.Get("Allow")+")")
		case http.StatusNotFound, 0:
			writeErr(w, http.StatusNotFound, "no endpoint "+r.URL.Path)
		default: // a redirect (a path to clean): as the mux says
			mux.ServeHTTP(w, r)
		}
	})
}

// missCapture keeps the status and headers of the mux's miss handler.
type missCapture struct {
	header http.Header
	code   int
}

func (c *missCapture) Header() http.Header         { return c.header }
func (c *missCapture) Write(b []byte) (int, error) { return len(b), nil }
func (c *missCapture) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
