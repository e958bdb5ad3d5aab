package api

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// The API answers only its owner's programs, not the pages their browser
// shows. Three guards stand before every handler:
//
//   - the Host header must name a loopback host, the host of Config.Addr
//     or one of Config.AllowedHosts, so that a page whose domain was
//     rebound to 127.0.0.1 cannot read answers (DNS rebinding);
//   - a state-changing request a browser marks as cross-origin (Origin
//     other than the Host, or Sec-Fetch-Site cross-site or same-site) is
//     refused, whatever its content type (cross-site request forgery);
//   - a state-changing /api/v1 request must say Content-Type
//     application/json (the workflow document also a YAML type): a page
//     can send text/plain, a form or no type at all without asking the
//     server first, never application/json.
//
// The GitHub webhook is exempt from the Host check: it arrives through
// whatever public host name forwards it, and its signature, not its Host,
// authenticates it.

// WebhookPath is the path GitHub delivers webhooks to (Config.GitHubWebhook).
const WebhookPath = "/webhooks/github"

// safeMethod reports whether m may not change anything (GET, HEAD, OPTIONS).
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// forbidden is a 403 answer with a message the requester may read.
func forbidden(format string, args ...any) error {
	return &httpError{status: http.StatusForbidden, err: models.Errorf(models.CodeUnauthorized, format, args...)}
}

// hostSet holds the host names the Host header may name besides loopback.
type hostSet map[string]bool

// newHostSet returns the hosts of addr (unless it is a wildcard) and
// allowed, normalised; an entry that is not a host is an error naming it.
func newHostSet(addr string, allowed []string) (hostSet, error) {
	hs := hostSet{}
	for i, h := range allowed {
		n, err := normalizeAllowedHost(h)
		if err != nil {
			return nil, fmt.Errorf("AllowedHosts[%d]: %w", i, err)
		}
		hs[n] = true
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		h := normalizeHost(host)
		if ip, err := netip.ParseAddr(h); err != nil || !ip.IsUnspecified() {
			hs[h] = true
		}
	}
	return hs, nil
}

// normalizeAllowedHost checks and normalises one entry of AllowedHosts: a
// host name or an IP address, without scheme, port or wildcard.
func normalizeAllowedHost(h string) (string, error) {
	n := strings.TrimSuffix(strings.ToLower(h), ".")
	if strings.HasPrefix(n, "[") && strings.HasSuffix(n, "]") {
		n = n[1 : len(n)-1]
	}
	if _, err := netip.ParseAddr(n); err == nil {
		return n, nil
	}
	if !models.ValidHostName(n) {
		return "", fmt.Errorf("%s is not a host name or IP address (no scheme, port or wildcard: e.g. agentqueued.lan)", quoteShort(h))
	}
	return n, nil
}

// normalizeHost returns the host of a Host header value: without its port
// and IPv6 brackets, lower-case, without a trailing dot.
func normalizeHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// isLoopbackHost reports whether host (a host name or IP address, without
// port) is "localhost" or a loopback address (127.0.0.0/8, ::1).
func isLoopbackHost(host string) bool { return models.IsLoopbackHost(normalizeHost(host)) }

// allows reports whether a request's Host header names a host the API
// answers.
func (hs hostSet) allows(host string) bool {
	if host == "" {
		return false
	}
	return isLoopbackHost(host) || hs[normalizeHost(host)]
}

// guard applies the Host, cross-origin and Content-Type checks before next.
func (s *Server) guard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		webhook := r.URL.Path == WebhookPath && s.cfg.GitHubWebhook != nil
		if !webhook && !s.hosts.allows(r.Host) {
			s.log.InfoContext(r.Context(), "request refused: host not allowed", "host", cleanHeader(r.Host),
				"method", r.Method, "path", logPath(r.URL.Path))
			s.writeError(w, r, forbidden("host %s is not served: the API answers loopback hosts (localhost, 127.0.0.1, ::1), "+
				"the listen address's host and api.allowed_hosts", quoteShort(r.Host)))
			return
		}
		if err := cop.Check(r); err != nil {
			s.log.InfoContext(r.Context(), "request refused: cross-origin", "origin", cleanHeader(r.Header.Get("Origin")),
				"sec_fetch_site", cleanHeader(r.Header.Get("Sec-Fetch-Site")), "method", r.Method, "path", logPath(r.URL.Path))
			s.writeError(w, r, forbidden("cross-origin request refused: a page of another origin may not call %s "+
				"(Origin %s, Sec-Fetch-Site %s)", r.Method, quoteShort(r.Header.Get("Origin")),
				quoteShort(r.Header.Get("Sec-Fetch-Site"))))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireJSON refuses state-changing /api/v1 requests whose Content-Type
// is not JSON (nor, for a workflow document, YAML), with or without a body.
func (s *Server) requireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if safeMethod(r.Method) || !underAPI(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		ct := r.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		ok := err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
		document := r.Method == http.MethodPost && r.URL.Path == APIPrefix+"/workflows"
		if !ok && document && err == nil {
			ok = slices.Contains(workflowMediaTypes, mt) || strings.HasSuffix(mt, "+yaml")
		}
		if !ok {
			got := "none"
			if ct != "" {
				got = quoteShort(ct)
			}
			want := "application/json"
			if document {
				want = "one of " + strings.Join(workflowMediaTypes, ", ")
			}
			s.writeError(w, r, &httpError{status: http.StatusUnsupportedMediaType, err: models.Errorf(models.CodeInvalid,
				"request: Content-Type must be %s (got %s); a %s request needs it, with or without a body",
				want, got, shortText(r.Method))})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// underAPI reports whether path is under APIPrefix.
func underAPI(path string) bool {
	return path == APIPrefix || strings.HasPrefix(path, APIPrefix+"/")
}
