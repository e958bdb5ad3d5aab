package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// CookieName is the name of the dashboard's session cookie. It holds a
// random session id the server keeps, never the token.
const CookieName = "aq_session"

// SessionPrefix starts the paths of a logged-in session's pages: with a
// token configured every page, form and event stream of a session is
// under SessionPrefix + <the session's path secret>, and its cookie is
// sent only there. A path secret without the session's cookie, or the
// cookie without it, grants nothing (docs/security.md).
const SessionPrefix = Prefix + "/s/"

// session is one browser's login: its CSRF token and the message of its
// last form, waiting for the next page. With a token configured it also
// has a path secret, the second half of what the browser must show.
type session struct {
	id string
	// secret is the path secret: its pages are under
	// SessionPrefix+secret. Empty without a token (pages under Prefix).
	secret   string
	csrf     string
	lastUsed time.Time
	flash    string
	flashErr bool
}

// base is the path the session's pages are under: SessionPrefix and its
// path secret, or Prefix for a session without one.
func (s *session) base() string {
	if s == nil || s.secret == "" {
		return Prefix
	}
	return SessionPrefix + s.secret
}

// sessions holds the logins in memory: a restart of the daemon logs every
// browser out.
type sessions struct {
	now func() time.Time
	ttl time.Duration
	max int

	mu   sync.Mutex
	byID map[string]*session
}

func newSessions(now func() time.Time, ttl time.Duration, max int) *sessions {
	return &sessions{now: now, ttl: ttl, max: max, byID: map[string]*session{}}
}

// randomToken returns 32 random bytes, URL-safe base64.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session, forgetting expired ones and, when max are
// kept, the least recently used. withSecret gives it a path secret.
func (ss *sessions) create(withSecret bool) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	if len(ss.byID) >= ss.max {
		var oldest *session
		for id, s := range ss.byID {
			if now.Sub(s.lastUsed) > ss.ttl {
				delete(ss.byID, id)
			} else if oldest == nil || s.lastUsed.Before(oldest.lastUsed) {
				oldest = s
			}
		}
		if len(ss.byID) >= ss.max && oldest != nil {
			delete(ss.byID, oldest.id)
		}
	}
	s := &session{id: randomToken(), csrf: randomToken(), lastUsed: now}
	if withSecret {
		s.secret = randomToken()
	}
	ss.byID[s.id] = s
	return s
}

// find returns the live session one of ids names whose path secret is
// secret ("": a session without one), and extends it; nil when there is
// none. The secrets are compared in constant time.
func (ss *sessions) find(ids []string, secret string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	for _, id := range ids {
		s := ss.byID[id]
		if s == nil {
			continue
		}
		if now.Sub(s.lastUsed) > ss.ttl {
			delete(ss.byID, id)
			continue
		}
		if subtle.ConstantTimeCompare([]byte(s.secret), []byte(secret)) != 1 {
			continue
		}
		s.lastUsed = now
		return s
	}
	return nil
}

// remove forgets a session (logout).
func (ss *sessions) remove(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byID, id)
}

// setFlash keeps a message for the session's next page.
func (ss *sessions) setFlash(s *session, msg string, isErr bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s.flash, s.flashErr = msg, isErr
}

// takeFlash returns the session's message once.
func (ss *sessions) takeFlash(s *session) (string, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	msg, isErr := s.flash, s.flashErr
	s.flash, s.flashErr = "", false
	return msg, isErr
}

// validCSRF reports whether token is the session's CSRF token.
func validCSRF(s *session, token string) bool {
	return s != nil && token != "" && subtle.ConstantTimeCompare([]byte(s.csrf), []byte(token)) == 1
}

type sessionKey struct{}

// sessionOf returns the request's session (set by sessionGate or
// requireSession), or nil.
func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	return s
}

// withSession returns r carrying sess.
func withSession(r *http.Request, sess *session) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess))
}

// baseOf is the path the request's pages are under: its session's base,
// or Prefix.
func baseOf(r *http.Request) string { return sessionOf(r).base() }

// link returns the URL of the dashboard path p (under Prefix, as the
// routes name it: "/ui/tasks/x") in the request's session: under its
// base. Any other p is returned as it is.
func link(r *http.Request, p string) string {
	rest, ok := strings.CutPrefix(p, Prefix)
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/") && !strings.HasPrefix(rest, "?")) {
		return p
	}
	return baseOf(r) + rest
}

// cookieIDs returns the values of the request's session cookies: a
// browser sends one per path it holds one for.
func cookieIDs(r *http.Request) []string {
	var ids []string
	for _, c := range r.CookiesNamed(CookieName) {
		ids = append(ids, c.Value)
	}
	return ids
}

// setCookie gives the browser the session's id: HttpOnly,
// SameSite=Strict, Secure over TLS, and sent only under the session's
// base (Path=/ui/s/<secret>/, or Path=/ui for a session without a path
// secret). maxAge -1 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, sess *session, maxAge int) {
	path, value := sess.base(), sess.id
	if sess.secret != "" {
		path += "/"
	}
	if maxAge < 0 {
		value = ""
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: path, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: maxAge})
}

// crossSiteSubresource reports whether the browser marks r as started by
// another site (Sec-Fetch-Site cross-site or same-site) for anything but
// opening a page in a window: an image, a script, a fetch or a frame.
// Such a request never carries the SameSite=Strict cookie, so it would
// start a session each time and evict people's sessions. A link followed
// from another site (Discord, an email) is a navigation and still opens
// the page.
func crossSiteSubresource(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return r.Header.Get("Sec-Fetch-Mode") != "navigate" || r.Header.Get("Sec-Fetch-Dest") != "document"
	}
	return false
}

// cutSessionPath splits a path under SessionPrefix into the path secret
// and the dashboard path it names: Prefix and what follows the secret.
func cutSessionPath(p string) (secret, inner string, ok bool) {
	rest, ok := strings.CutPrefix(p, SessionPrefix)
	if !ok {
		return "", "", false
	}
	secret, tail, more := strings.Cut(rest, "/")
	if !more {
		return secret, Prefix, true
	}
	return secret, Prefix + "/" + tail, true
}

// sessionGate finds the request's session before the routes see it. A
// path under SessionPrefix is granted only when a session cookie the
// request carries names a live session whose path secret is the path's:
// the request then goes on with the path secret cut from its path (the
// routes, the logs and the error pages see /ui/...). Any other request
// under SessionPrefix is refused as one without a session (refuse), and
// without a token, where no session has a path secret, a page there is
// sent to its path under Prefix. Elsewhere, without a token, the session
// the cookie names (if any) goes along; with a token nothing does.
func (s *Server) sessionGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret, inner, ok := cutSessionPath(r.URL.Path)
		if !ok {
			if s.cfg.Token == "" {
				if sess := s.sessions.find(cookieIDs(r), ""); sess != nil {
					r = withSession(r, sess)
				}
			}
			next.ServeHTTP(w, r)
			return
		}
		r = innerRequest(r, secret, inner)
		var sess *session
		if s.cfg.Token != "" && secret != "" {
			sess = s.sessions.find(cookieIDs(r), secret)
		}
		switch {
		case sess != nil:
			next.ServeHTTP(w, withSession(r, sess))
		case s.cfg.Token == "" && isRead(r):
			http.Redirect(w, r, r.URL.RequestURI(), http.StatusSeeOther)
		default:
			s.refuse(w, r)
		}
	})
}

// innerRequest returns r with the session's part (SessionPrefix and the
// path secret) cut from its path: inner is the path that remains.
func innerRequest(r *http.Request, secret, inner string) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path = inner
	if raw, ok := strings.CutPrefix(u.RawPath, SessionPrefix+secret); ok {
		u.RawPath = Prefix + raw
	} else {
		u.RawPath = ""
	}
	r2.URL = &u
	r2.RequestURI = u.RequestURI()
	return r2
}

// isRead reports whether r only reads (GET or HEAD).
func isRead(r *http.Request) bool { return r.Method == http.MethodGet || r.Method == http.MethodHead }

// refuse answers a request without a session: a page is sent to the
// login page, which returns to it after the login; the event stream gets
// 401 and anything else (a form) 403.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request) {
	switch {
	case isRead(r) && r.URL.Path != Prefix+"/events":
		http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
	case isRead(r):
		s.renderError(w, r, http.StatusUnauthorized, models.Errorf(models.CodeUnauthorized,
			"not logged in (or the login expired): log in again"))
	default:
		s.renderError(w, r, http.StatusForbidden, models.Errorf(models.CodeUnauthorized,
			"not logged in (or the login expired): log in again"))
	}
}

// requireSession runs next with the request's session (sessionGate's).
// With a token configured a request without one is refused (refuse);
// without one a session is started at once, there being nothing to log
// in with — unless another site started the request for a subresource
// (crossSiteSubresource): that is refused with 403.
func (s *Server) requireSession(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess := sessionOf(r)
		if sess == nil && s.cfg.Token == "" {
			if crossSiteSubresource(r) {
				s.renderError(w, r, http.StatusForbidden, models.Errorf(models.CodeUnauthorized,
					"a request from another site starts no session: open the dashboard itself"))
				return
			}
			sess = s.sessions.create(false)
			setCookie(w, r, sess, 0)
			r = withSession(r, sess)
		}
		if sess == nil {
			s.refuse(w, r)
			return
		}
		next(w, r)
	}
}

// loginPage is the data of the login page.
type loginPage struct {
	Next    string
	Message string
	NoToken bool
}

func (s *Server) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	next := r.URL.Query().Get("next")
	if !localPath(next) {
		next = Prefix + "/overview"
	}
	s.render(w, r, http.StatusOK, "login", "", loginPage{Next: next, NoToken: s.cfg.Token == ""})
}

// handleLogin checks the token typed and starts a session: with a token
// its pages are under a path of their own (SessionPrefix and the new
// session's path secret), where the browser is sent.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	next := r.PostFormValue("next")
	if !localPath(next) {
		next = Prefix + "/overview"
	}
	if s.cfg.Token != "" {
		// Over budget, the token is not checked at all: right and wrong
		// ones get the same answer (internal/throttle). Wrong ones are
		// logged by the throttle, summarised by source.
		attempt, wait := s.cfg.Throttle.Begin(r.RemoteAddr)
		if attempt == nil {
			secs := int64(wait / time.Second)
			w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
			s.render(w, r, http.StatusTooManyRequests, "login", "", loginPage{Next: next,
				Message: fmt.Sprintf("too many wrong tokens from this address: try again in %d s", secs)})
			return
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(r.PostFormValue("token"))))
		want := sha256.Sum256([]byte(s.cfg.Token))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			attempt.Failed()
			s.render(w, r, http.StatusUnauthorized, "login", "", loginPage{Next: next, Message: "wrong token"})
			return
		}
		attempt.Succeeded()
	}
	if old := sessionOf(r); old != nil {
		s.sessions.remove(old.id) // a new id at login: a planted cookie is worth nothing
	}
	sess := s.sessions.create(s.cfg.Token != "")
	setCookie(w, r, sess, 0)
	http.Redirect(w, r, link(withSession(r, sess), next), http.StatusSeeOther)
}

// handleLogout ends the session (its CSRF token required): the session is
// forgotten, so neither its cookie nor its path grants anything after.
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	sess := sessionOf(r)
	if !validCSRF(sess, r.PostFormValue("csrf")) {
		s.renderError(w, r, http.StatusForbidden, models.Errorf(models.CodeUnauthorized,
			"the form's security token is missing or stale: reload the page and try again"))
		return
	}
	s.sessions.remove(sess.id)
	setCookie(w, r, sess, -1)
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}
