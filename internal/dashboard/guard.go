package dashboard

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// tokenCookie keeps the token in the browser after a ?token= visit.
const tokenCookie = "jobq_dashboard_token"

// csrfHeader carries the CSRF token on mutating requests; the page reads
// the token from /api/info, which another site cannot read.
const csrfHeader = "X-Jobq-Csrf"

// guard applies the checks every request passes: a Host the server answers
// to (against DNS rebinding on loopback), the token when there is one, and
// the security headers of every response.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if s.cfg.Token == "" && !loopbackHost(r.Host) {
			http.Error(w, "jobq dashboard: this server answers to 127.0.0.1, [::1] and localhost only", http.StatusMisdirectedRequest)
			return
		}
		if s.cfg.Token != "" {
			switch s.authorize(w, r) {
			case redirected:
				return // the 303 is the whole answer
			case denied:
				w.Header().Set("WWW-Authenticate", `Bearer realm="jobq dashboard"`)
				http.Error(w, "jobq dashboard: a token is required: open the page once as /?token=TOKEN, or send Authorization: Bearer TOKEN", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// verdict is what authorize decided.
type verdict int

const (
	// denied: no valid token; the caller answers 401.
	denied verdict = iota
	// allowed: serve the request.
	allowed
	// redirected: a page asked with a valid ?token=; authorize has
	// answered with the cookie and a 303 to the address without it, and
	// nothing more may be written.
	redirected
)

// authorize checks the token: the Authorization header, the cookie, or a
// ?token= parameter, which is moved into the cookie.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) verdict {
	if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.tokenOK(auth) {
		return allowed
	}
	if c, err := r.Cookie(tokenCookie); err == nil && s.tokenOK(c.Value) {
		return allowed
	}
	if t := r.URL.Query().Get("token"); t != "" && s.tokenOK(t) {
		http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") {
			// Drop the token from the page's address bar and history; API
			// clients get their answer at once.
			u := *r.URL
			q := u.Query()
			q.Del("token")
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return redirected
		}
		return allowed
	}
	return denied
}

func (s *Server) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.cfg.Token)) == 1
}

// loopbackHost reports whether a Host header names a loopback address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin checks a mutating request: a POST carrying the CSRF token,
// whose Origin (when the browser sends one) is this server, and which the
// browser does not mark as cross-site.
func (s *Server) sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "jobq dashboard: use POST", http.StatusMethodNotAllowed)
		return false
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(csrfHeader)), []byte(s.csrf)) != 1 {
		http.Error(w, "jobq dashboard: missing or wrong CSRF token; reload the page", http.StatusForbidden)
		return false
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		http.Error(w, "jobq dashboard: cross-site request refused", http.StatusForbidden)
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			http.Error(w, "jobq dashboard: request from another origin refused", http.StatusForbidden)
			return false
		}
	}
	return true
}
