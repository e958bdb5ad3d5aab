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

// session is one browser's login: its CSRF token and the message of its
// last form, waiting for the next page.
type session struct {
	id       string
	csrf     string
	lastUsed time.Time
	flash    string
	flashErr bool
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
// kept, the least recently used.
func (ss *sessions) create() *session {
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
	ss.byID[s.id] = s
	return s
}

// get returns the live session id names and extends it, or nil.
func (ss *sessions) get(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byID[id]
	if s == nil {
		return nil
	}
	now := ss.now()
	if now.Sub(s.lastUsed) > ss.ttl {
		delete(ss.byID, id)
		return nil
	}
	s.lastUsed = now
	return s
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

// sessionOf returns the request's session (set by requireSession), or nil.
func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(sessionKey{}).(*session)
	return s
}

// setCookie gives the browser its session id: HttpOnly, SameSite=Strict,
// Path=/ui, Secure over TLS.
func setCookie(w http.ResponseWriter, r *http.Request, id string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: id, Path: Prefix, HttpOnly: true,
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

// requireSession runs next with the request's session. With a token
// configured a request without a live session is sent to the login page
// (a GET) or refused (401); without one a session is started at once,
// there being nothing to log in with — unless another site started the
// request for a subresource (crossSiteSubresource): that is refused with
// 403.
func (s *Server) requireSession(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var sess *session
		if c, err := r.Cookie(CookieName); err == nil {
			sess = s.sessions.get(c.Value)
		}
		if sess == nil && s.cfg.Token == "" {
			if crossSiteSubresource(r) {
				s.renderError(w, r, http.StatusForbidden, models.Errorf(models.CodeUnauthorized,
					"a request from another site starts no session: open the dashboard itself"))
				return
			}
			sess = s.sessions.create()
			setCookie(w, r, sess.id, 0)
		}
		if sess == nil {
			if r.Method == http.MethodGet && r.URL.Path != Prefix+"/events" {
				http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			s.renderError(w, r, http.StatusUnauthorized, models.Errorf(models.CodeUnauthorized,
				"not logged in (or the login expired): log in again"))
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, sess)))
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

// handleLogin checks the token typed and starts a session.
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
	if c, err := r.Cookie(CookieName); err == nil {
		s.sessions.remove(c.Value) // a new id at login: a planted cookie is worth nothing
	}
	sess := s.sessions.create()
	setCookie(w, r, sess.id, 0)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// handleLogout ends the session (its CSRF token required).
func (s *Server) handleLogout(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	sess := sessionOf(r)
	if !validCSRF(sess, r.PostFormValue("csrf")) {
		s.renderError(w, r, http.StatusForbidden, models.Errorf(models.CodeUnauthorized,
			"the form's security token is missing or stale: reload the page and try again"))
		return
	}
	s.sessions.remove(sess.id)
	setCookie(w, r, "", -1)
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}
