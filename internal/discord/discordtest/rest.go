package discordtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// restReq is one parsed REST request.
type restReq struct {
	r      *http.Request
	path   string // after /api/vN
	params map[string]string
	query  url.Values
	body   []byte
}

// response buffers a REST answer so the request is recorded before the
// client can see the reply.
type response struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *response) json(status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("discordtest: encoding response: " + err.Error())
	}
	w.header.Set("Content-Type", "application/json")
	w.status = status
	w.body.Write(b)
}

func (w *response) noContent() { w.status = http.StatusNoContent }

// apiError writes Discord's error body {"message":…, "code":…}.
func (w *response) apiError(status, code int, msg string) {
	w.json(status, map[string]any{"message": msg, "code": code})
}

func (w *response) formError(fe *formErrors) {
	w.json(http.StatusBadRequest, map[string]any{"message": "Invalid Form Body", "code": 50035, "errors": fe.root})
}

// Discord JSON error codes used by the fake.
const (
	codeGeneral              = 0
	codeUnknownChannel       = 10003
	codeUnknownMessage       = 10008
	codeUnknownWebhook       = 10015
	codeUnknownCommand       = 10063
	codeUnknownInteraction   = 10062
	codeMissingAccess        = 50001
	codeNotAuthor            = 50005
	codeEmptyMessage         = 50006
	codeWrongChannelType     = 50024
	codeInvalidFormBody      = 50035
	codeInvalidJSON          = 50109
	codeAlreadyAcknowledged  = 40060
	codeThreadAlreadyCreated = 160004
)

type handler func(s *Server, w *response, q *restReq)

type route struct {
	pattern string
	segs    []string
	methods map[string]handler
	noAuth  bool // interaction and webhook-token routes are authenticated by their token
}

var routes = buildRoutes()

func buildRoutes() []*route {
	r := func(pattern string, noAuth bool, methods map[string]handler) *route {
		return &route{pattern: pattern, segs: strings.Split(pattern, "/"), methods: methods, noAuth: noAuth}
	}
	return []*route{
		r("gateway", true, map[string]handler{"GET": (*Server).getGateway}),
		r("gateway/bot", false, map[string]handler{"GET": (*Server).getGatewayBot}),
		r("users/@me", false, map[string]handler{"GET": (*Server).getMe}),
		r("applications/:app/guilds/:guild/commands", false, map[string]handler{
			"GET": (*Server).listCommands, "PUT": (*Server).overwriteCommands, "POST": (*Server).createCommand,
		}),
		r("applications/:app/guilds/:guild/commands/:cmd", false, map[string]handler{
			"GET": (*Server).getCommand, "PATCH": (*Server).editCommand, "DELETE": (*Server).deleteCommand,
		}),
		r("applications/:app/commands", false, map[string]handler{
			"GET": (*Server).listCommands, "PUT": (*Server).overwriteCommands, "POST": (*Server).createCommand,
		}),
		r("applications/:app/commands/:cmd", false, map[string]handler{
			"GET": (*Server).getCommand, "PATCH": (*Server).editCommand, "DELETE": (*Server).deleteCommand,
		}),
		r("interactions/:id/:token/callback", true, map[string]handler{"POST": (*Server).interactionCallback}),
		r("webhooks/:app/:token", true, map[string]handler{"POST": (*Server).webhookExecute}),
		r("webhooks/:app/:token/messages/:mid", true, map[string]handler{
			"GET": (*Server).webhookGetMessage, "PATCH": (*Server).webhookEditMessage, "DELETE": (*Server).webhookDeleteMessage,
		}),
		r("channels/:ch", false, map[string]handler{"GET": (*Server).getChannel, "PATCH": (*Server).editChannel}),
		r("channels/:ch/typing", false, map[string]handler{"POST": (*Server).typing}),
		r("channels/:ch/messages", false, map[string]handler{"GET": (*Server).listMessages, "POST": (*Server).createMessage}),
		r("channels/:ch/messages/:mid", false, map[string]handler{
			"GET": (*Server).getMessage, "PATCH": (*Server).editMessage, "DELETE": (*Server).deleteMessage,
		}),
		r("channels/:ch/messages/:mid/threads", false, map[string]handler{"POST": (*Server).startThreadFromMessage}),
		r("channels/:ch/threads", false, map[string]handler{"POST": (*Server).startThread}),
	}
}

func matchRoute(path string) (*route, map[string]string) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for _, rt := range routes {
		if len(rt.segs) != len(segs) {
			continue
		}
		params := map[string]string{}
		ok := true
		for i, p := range rt.segs {
			if strings.HasPrefix(p, ":") {
				if segs[i] == "" {
					ok = false
					break
				}
				params[p[1:]] = segs[i]
			} else if p != segs[i] {
				ok = false
				break
			}
		}
		if ok {
			return rt, params
		}
	}
	return nil, nil
}

var apiPrefix = regexp.MustCompile(`^/api(?:/v\d+)?(/.*)$`)

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/gateway" || r.URL.Path == "/gateway/" {
		s.serveGateway(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	// The request is recorded before it is served: whoever sees what it
	// changed (a message, a reaction) finds it in Requests. Its status is
	// 0 until it is answered.
	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, Request{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body, Time: time.Now(),
	})
	s.mu.Unlock()
	rw := &response{header: http.Header{}}
	s.serveREST(rw, r, body)
	if rw.status == 0 {
		rw.status = http.StatusOK
	}
	s.mu.Lock()
	s.requests[i].Status = rw.status
	s.notifyLocked()
	s.mu.Unlock()
	if rw.status >= 400 {
		s.logf("%s %s -> %d %s", r.Method, r.URL.Path, rw.status, strings.TrimSpace(rw.body.String()))
	} else {
		s.logf("%s %s -> %d", r.Method, r.URL.Path, rw.status)
	}
	for k, v := range rw.header {
		w.Header()[k] = v
	}
	w.WriteHeader(rw.status)
	_, _ = w.Write(rw.body.Bytes())
}

func (s *Server) serveREST(w *response, r *http.Request, body []byte) {
	m := apiPrefix.FindStringSubmatch(r.URL.Path)
	if m == nil {
		w.apiError(http.StatusNotFound, codeGeneral, "404: Not Found")
		return
	}
	path := m[1]
	if s.injectedRateLimit(w, r.Method, r.URL.Path) {
		return
	}
	rt, params := matchRoute(path)
	if rt == nil {
		w.apiError(http.StatusNotFound, codeGeneral, "404: Not Found")
		return
	}
	h := rt.methods[r.Method]
	if h == nil {
		w.apiError(http.StatusMethodNotAllowed, codeGeneral, "405: Method Not Allowed")
		return
	}
	if !rt.noAuth && r.Header.Get("Authorization") != "Bot "+s.opts.Token {
		w.apiError(http.StatusUnauthorized, codeGeneral, "401: Unauthorized")
		return
	}
	s.rateLimitHeaders(w, r.Method, rt, params)
	h(s, w, &restReq{r: r, path: path, params: params, query: r.URL.Query(), body: body})
}

func bucketHash(method, pattern string) string {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s %s", method, pattern)
	return fmt.Sprintf("%016x", h.Sum64())
}

// rateLimitHeaders adds Discord's per-route headers. Remaining cycles
// 4,3,2,1 and never reaches 0, so discordgo's bucket logic runs but never
// waits.
func (s *Server) rateLimitHeaders(w *response, method string, rt *route, params map[string]string) {
	bucket := bucketHash(method, rt.pattern)
	key := bucket + ":" + params["ch"] + ":" + params["guild"] + ":" + params["app"] + ":" + params["token"] + ":" + params["id"]
	s.mu.Lock()
	n := s.buckets[key]
	s.buckets[key] = n + 1
	s.mu.Unlock()
	w.header.Set("X-RateLimit-Bucket", bucket)
	w.header.Set("X-RateLimit-Limit", "5")
	w.header.Set("X-RateLimit-Remaining", strconv.Itoa(4-n%4))
	w.header.Set("X-RateLimit-Reset", epochSeconds(time.Now().Add(time.Second)))
	w.header.Set("X-RateLimit-Reset-After", "1.000")
}

func epochSeconds(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

type rateLimitRule struct {
	n          int
	retryAfter time.Duration
	global     bool
	match      func(method, path string) bool
}

// RateLimit makes the next n REST requests for which match returns true
// (all requests if match is nil) fail with HTTP 429 and Discord's body
// {"message":"You are being rate limited.","retry_after":<seconds>,"global":<bool>}
// plus the headers Retry-After (whole seconds, rounded up), X-RateLimit-Scope,
// X-RateLimit-Bucket, X-RateLimit-Limit, X-RateLimit-Remaining: 0,
// X-RateLimit-Reset, X-RateLimit-Reset-After and, for a global limit,
// X-RateLimit-Global: true. match receives the method and the URL path as
// received, e.g. "/api/v9/channels/1/messages". Limits are enforced only
// through RateLimit.
func (s *Server) RateLimit(n int, retryAfter time.Duration, global bool, match func(method, path string) bool) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = append(s.limits, &rateLimitRule{n: n, retryAfter: retryAfter, global: global, match: match})
}

func (s *Server) injectedRateLimit(w *response, method, path string) bool {
	s.mu.Lock()
	var rule *rateLimitRule
	for _, l := range s.limits {
		if l.n > 0 && (l.match == nil || l.match(method, path)) {
			rule = l
			l.n--
			break
		}
	}
	s.mu.Unlock()
	if rule == nil {
		return false
	}
	secs := rule.retryAfter.Seconds()
	w.header.Set("Retry-After", strconv.Itoa(int(math.Ceil(secs))))
	w.header.Set("X-RateLimit-Limit", "5")
	w.header.Set("X-RateLimit-Remaining", "0")
	w.header.Set("X-RateLimit-Reset", epochSeconds(time.Now().Add(rule.retryAfter)))
	w.header.Set("X-RateLimit-Reset-After", strconv.FormatFloat(secs, 'f', 3, 64))
	w.header.Set("X-RateLimit-Bucket", bucketHash(method, path))
	if rule.global {
		w.header.Set("X-RateLimit-Global", "true")
		w.header.Set("X-RateLimit-Scope", "global")
	} else {
		w.header.Set("X-RateLimit-Scope", "user")
	}
	w.json(http.StatusTooManyRequests, map[string]any{
		"message": "You are being rate limited.", "retry_after": secs, "global": rule.global,
	})
	return true
}

// upload is one file part of a multipart body.
type upload struct {
	name        string
	contentType string
	data        []byte
}

// parseBody returns the JSON payload of a request (the body itself, or the
// payload_json part of a multipart/form-data body) and any uploaded files
// (parts named files[n], in order).
func parseBody(q *restReq) ([]byte, []upload, error) {
	ct := q.r.Header.Get("Content-Type")
	mt, params, _ := mime.ParseMediaType(ct)
	if mt != "multipart/form-data" {
		return q.body, nil, nil
	}
	mr := multipart.NewReader(bytes.NewReader(q.body), params["boundary"])
	var payload []byte
	var files []upload
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, nil, err
		}
		switch name := p.FormName(); {
		case name == "payload_json":
			payload = data
		case p.FileName() != "" || strings.HasPrefix(name, "files["):
			ctype := p.Header.Get("Content-Type")
			if ctype == "" {
				ctype = "application/octet-stream"
			}
			files = append(files, upload{name: p.FileName(), contentType: ctype, data: data})
		}
	}
	return payload, files, nil
}

// decodeBody decodes the JSON payload into v; an empty payload leaves v
// alone. It answers 400 50109 for invalid JSON and reports false.
func decodeBody(w *response, payload []byte, v any) bool {
	if len(bytes.TrimSpace(payload)) == 0 {
		return true
	}
	if err := json.Unmarshal(payload, v); err != nil {
		w.apiError(http.StatusBadRequest, codeInvalidJSON, "The request body contains invalid JSON.")
		return false
	}
	return true
}

func (s *Server) getGateway(w *response, q *restReq) {
	w.json(http.StatusOK, map[string]any{"url": s.wsURL})
}

func (s *Server) getGatewayBot(w *response, q *restReq) {
	w.json(http.StatusOK, map[string]any{
		"url":    s.wsURL,
		"shards": 1,
		"session_start_limit": map[string]any{
			"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1,
		},
	})
}

func (s *Server) getMe(w *response, q *restReq) {
	w.json(http.StatusOK, s.botUser())
}

// formErrors collects field errors in Discord's nested "errors" shape:
// {"content": {"_errors": [{"code": …, "message": …}]}}.
type formErrors struct {
	root map[string]any
}

// add records an error at a dotted path such as "components.0.custom_id";
// the empty path is the body itself.
func (f *formErrors) add(path, code, msg string) {
	if f.root == nil {
		f.root = map[string]any{}
	}
	node := f.root
	if path != "" {
		for _, p := range strings.Split(path, ".") {
			next, ok := node[p].(map[string]any)
			if !ok {
				next = map[string]any{}
				node[p] = next
			}
			node = next
		}
	}
	errs, _ := node["_errors"].([]any)
	node["_errors"] = append(errs, map[string]any{"code": code, "message": msg})
}

func (f *formErrors) failed() bool { return len(f.root) > 0 }

func join(path string, elems ...any) string {
	for _, e := range elems {
		s := fmt.Sprint(e)
		if path == "" {
			path = s
		} else {
			path += "." + s
		}
	}
	return path
}
