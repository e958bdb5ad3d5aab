package discordtest

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
)

// Gateway opcodes.
const (
	opDispatch       = 0
	opHeartbeat      = 1
	opIdentify       = 2
	opPresenceUpdate = 3
	opVoiceState     = 4
	opResume         = 6
	opReconnect      = 7
	opRequestMembers = 8
	opInvalidSession = 9
	opHello          = 10
	opHeartbeatACK   = 11
)

// Gateway close codes and their texts, as Discord sends them.
var closeTexts = map[int]string{
	4000: "Unknown error.",
	4001: "Unknown opcode.",
	4002: "Error while decoding payload.",
	4003: "Not authenticated.",
	4004: "Authentication failed.",
	4005: "Already authenticated.",
	4007: "Invalid seq.",
	4008: "Rate limited.",
	4009: "Session timed out.",
	4010: "Invalid shard.",
	4011: "Sharding required.",
	4012: "Invalid API version.",
	4013: "Invalid intent(s).",
	4014: "Disallowed intent(s).",
}

const privilegedIntents = discordgo.IntentGuildMembers | discordgo.IntentGuildPresences | discordgo.IntentMessageContent

const writeTimeout = 10 * time.Second

// Dispatch is one op 0 frame the gateway wrote to a connection, as recorded
// by Dispatches.
type Dispatch struct {
	SessionID string
	Seq       int64
	Type      string // "READY", "GUILD_CREATE", "INTERACTION_CREATE", …
	Replayed  bool   // sent again while answering a RESUME
	Data      json.RawMessage
	At        time.Time
}

// gwSession is a gateway session: what IDENTIFY creates and RESUME continues.
type gwSession struct {
	id       string
	intents  discordgo.Intent
	compress bool
	seq      int64
	log      []logEntry // dispatches after READY, for replay on RESUME
	invalid  bool
}

type logEntry struct {
	seq int64
	ev  *event
}

// event is a dispatch waiting to be sequenced and sent.
type event struct {
	t       string
	data    json.RawMessage
	blanked json.RawMessage // the same without message content; nil if content is never withheld
	intent  discordgo.Intent
}

func (e *event) payloadFor(intents discordgo.Intent) json.RawMessage {
	if e.blanked != nil && intents&discordgo.IntentMessageContent == 0 {
		return e.blanked
	}
	return e.data
}

type gwConn struct {
	ws       *websocket.Conn
	sess     *gwSession
	authed   bool
	compress bool
	skipAcks int
	closed   bool
	version  int
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (s *Server) serveGateway(w http.ResponseWriter, r *http.Request) {
	ws, err := upgrader.Upgrade(w, r, nil)
	status := http.StatusSwitchingProtocols
	if err != nil {
		status = http.StatusBadRequest
	}
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Status: status, Time: time.Now()})
	if err != nil || s.closed {
		s.notifyLocked()
		s.mu.Unlock()
		if ws != nil {
			ws.Close()
		}
		return
	}
	c := &gwConn{ws: ws, version: 10}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	defer s.wg.Done()
	s.logf("gateway: connect %s?%s", r.URL.Path, r.URL.RawQuery)
	ws.SetReadLimit(1 << 16)
	if v := r.URL.Query().Get("v"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 6 || n > 10 {
			s.closeConnLocked(c, 4012)
		}
		c.version = n
	}
	if enc := r.URL.Query().Get("encoding"); enc != "" && enc != "json" {
		s.closeConnLocked(c, 4002)
	}
	if !c.closed {
		ms := s.opts.HeartbeatInterval.Milliseconds()
		s.writeFrameLocked(c, opHello, map[string]any{"heartbeat_interval": ms, "_trace": []string{"discordtest"}}, 0, "")
	}
	s.notifyLocked()
	s.mu.Unlock()

	for {
		mt, data, err := ws.ReadMessage()
		if err != nil {
			s.connEnded(c, err)
			return
		}
		s.mu.Lock()
		if !c.closed {
			s.handleFrameLocked(c, mt, data)
		}
		s.mu.Unlock()
	}
}

// connEnded forgets a connection whose read side failed. A client that
// closes with 1000 or 1001 invalidates its session, as on Discord; a close
// frame answering the server's own close does not count.
func (s *Server) connEnded(c *gwConn, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		s.logf("gateway: client closed with %d %q", ce.Code, ce.Text)
		if (ce.Code == websocket.CloseNormalClosure || ce.Code == websocket.CloseGoingAway) && c.sess != nil && !c.closed {
			c.sess.invalid = true
		}
	} else {
		s.logf("gateway: connection ended: %v", err)
	}
	s.forgetConnLocked(c)
	c.ws.Close()
}

func (s *Server) forgetConnLocked(c *gwConn) {
	c.closed = true
	delete(s.conns, c)
	if s.live == c {
		s.live = nil
	}
	s.notifyLocked()
}

// closeConnLocked sends a close frame with code (none if code is 0) and
// closes the connection.
func (s *Server) closeConnLocked(c *gwConn, code int) {
	if c.closed {
		return
	}
	if code != 0 {
		s.logf("gateway: closing with %d %s", code, closeTexts[code])
		msg := websocket.FormatCloseMessage(code, closeTexts[code])
		_ = c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
	} else {
		s.logf("gateway: dropping connection")
	}
	s.forgetConnLocked(c)
	c.ws.Close()
}

func (s *Server) writeFrameLocked(c *gwConn, op int, d any, seq int64, t string) error {
	f := struct {
		Op int     `json:"op"`
		D  any     `json:"d"`
		S  *int64  `json:"s"`
		T  *string `json:"t"`
	}{Op: op, D: d}
	if op == opDispatch {
		f.S, f.T = &seq, &t
	}
	b, err := json.Marshal(f)
	if err != nil {
		panic("discordtest: encoding gateway frame: " + err.Error())
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(writeTimeout))
	if s.opts.Compress && c.compress {
		var buf bytes.Buffer
		zw := zlib.NewWriter(&buf)
		_, _ = zw.Write(b)
		_ = zw.Close()
		err = c.ws.WriteMessage(websocket.BinaryMessage, buf.Bytes())
	} else {
		err = c.ws.WriteMessage(websocket.TextMessage, b)
	}
	if err != nil {
		s.logf("gateway: write failed: %v", err)
		s.closeConnLocked(c, 0)
	}
	return err
}

func (s *Server) sendDispatchLocked(c *gwConn, seq int64, ev *event, replay bool) {
	data := ev.payloadFor(c.sess.intents)
	if s.writeFrameLocked(c, opDispatch, data, seq, ev.t) != nil {
		return
	}
	s.dispatches = append(s.dispatches, Dispatch{
		SessionID: c.sess.id, Seq: seq, Type: ev.t, Replayed: replay,
		Data: append(json.RawMessage(nil), data...), At: time.Now(),
	})
	s.logf("gateway: dispatch s=%d %s replay=%v", seq, ev.t, replay)
}

func (s *Server) handleFrameLocked(c *gwConn, mt int, data []byte) {
	var p struct {
		Op *int            `json:"op"`
		D  json.RawMessage `json:"d"`
	}
	if mt != websocket.TextMessage || json.Unmarshal(data, &p) != nil || p.Op == nil {
		s.closeConnLocked(c, 4002)
		return
	}
	op := *p.Op
	if !c.authed && op != opHeartbeat && op != opIdentify && op != opResume {
		s.closeConnLocked(c, 4003)
		return
	}
	switch op {
	case opHeartbeat:
		s.nHeartbeats++
		s.notifyLocked()
		if c.skipAcks > 0 {
			c.skipAcks--
			s.logf("gateway: heartbeat %s not acknowledged", string(p.D))
			return
		}
		s.writeFrameLocked(c, opHeartbeatACK, nil, 0, "")
	case opIdentify:
		s.identifyLocked(c, p.D)
	case opResume:
		s.resumeLocked(c, p.D)
	case opPresenceUpdate, opVoiceState, opRequestMembers:
		// Accepted and ignored: the fake has no presences, voice or member lists.
	default:
		s.closeConnLocked(c, 4001)
	}
}

func (s *Server) tokenOK(tok string) bool {
	return tok == s.opts.Token || tok == "Bot "+s.opts.Token
}

func (s *Server) identifyLocked(c *gwConn, raw json.RawMessage) {
	if c.authed {
		s.closeConnLocked(c, 4005)
		return
	}
	var id struct {
		Token    string  `json:"token"`
		Intents  *int64  `json:"intents"`
		Compress bool    `json:"compress"`
		Shard    *[2]int `json:"shard"`
	}
	if err := json.Unmarshal(raw, &id); err != nil {
		s.closeConnLocked(c, 4002)
		return
	}
	if !s.tokenOK(id.Token) {
		s.closeConnLocked(c, 4004)
		return
	}
	if id.Intents == nil || *id.Intents < 0 || *id.Intents >= 1<<26 {
		s.closeConnLocked(c, 4013)
		return
	}
	intents := discordgo.Intent(*id.Intents)
	if s.opts.DenyPrivilegedIntents && intents&privilegedIntents != 0 {
		s.closeConnLocked(c, 4014)
		return
	}
	if id.Shard != nil && (id.Shard[1] < 1 || id.Shard[0] < 0 || id.Shard[0] >= id.Shard[1]) {
		s.closeConnLocked(c, 4010)
		return
	}
	sess := &gwSession{id: randomHex(16), intents: intents, compress: id.Compress}
	s.sessions[sess.id] = sess
	s.sess = sess
	c.sess, c.authed, c.compress = sess, true, id.Compress
	s.live = c
	s.nSessions++
	s.logf("gateway: IDENTIFY intents=%d compress=%v session=%s", intents, id.Compress, sess.id)

	ready := map[string]any{
		"v":                       c.version,
		"user":                    s.botUser(),
		"session_id":              sess.id,
		"session_type":            "normal",
		"resume_gateway_url":      s.wsURL,
		"application":             map[string]any{"id": s.opts.ApplicationID, "flags": 0},
		"guilds":                  []map[string]any{{"id": s.opts.GuildID, "unavailable": true}},
		"private_channels":        []any{},
		"relationships":           []any{},
		"presences":               []any{},
		"guild_join_requests":     []any{},
		"geo_ordered_rtc_regions": []string{},
		"user_settings":           map[string]any{},
		"_trace":                  []string{"discordtest"},
	}
	if id.Shard != nil {
		ready["shard"] = id.Shard
	}
	b, _ := json.Marshal(ready)
	// Identified closes before READY goes out: a client's Open returns
	// on READY, and whoever it tells must find Identified closed.
	select {
	case <-s.identified:
	default:
		close(s.identified)
	}
	sess.seq++
	s.sendDispatchLocked(c, sess.seq, &event{t: "READY", data: b}, false)
	if c.closed {
		return
	}
	guild := &event{t: "GUILD_CREATE", data: s.guildJSONLocked(), intent: discordgo.IntentGuilds}
	queued := s.queued
	s.queued = nil
	for _, ev := range append([]*event{guild}, queued...) {
		if ev.intent != 0 && intents&ev.intent == 0 {
			continue
		}
		sess.seq++
		sess.log = append(sess.log, logEntry{seq: sess.seq, ev: ev})
		if !c.closed {
			s.sendDispatchLocked(c, sess.seq, ev, false)
		}
	}
}

func (s *Server) resumeLocked(c *gwConn, raw json.RawMessage) {
	if c.authed {
		s.closeConnLocked(c, 4005)
		return
	}
	var r struct {
		Token     string `json:"token"`
		SessionID string `json:"session_id"`
		Seq       int64  `json:"seq"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		s.closeConnLocked(c, 4002)
		return
	}
	if !s.tokenOK(r.Token) {
		s.closeConnLocked(c, 4004)
		return
	}
	sess := s.sessions[r.SessionID]
	if sess == nil || sess.invalid || sess != s.sess {
		s.logf("gateway: RESUME of unknown or invalid session %q: INVALID_SESSION", r.SessionID)
		s.writeFrameLocked(c, opInvalidSession, false, 0, "")
		return
	}
	if r.Seq > sess.seq || r.Seq < 0 {
		s.closeConnLocked(c, 4007)
		return
	}
	c.sess, c.authed, c.compress = sess, true, sess.compress
	s.live = c
	s.queued = nil
	s.logf("gateway: RESUME session=%s seq=%d (server at %d)", sess.id, r.Seq, sess.seq)
	for _, e := range sess.log {
		if e.seq > r.Seq && !c.closed {
			s.sendDispatchLocked(c, e.seq, e.ev, true)
		}
	}
	if c.closed {
		return
	}
	sess.seq++
	s.sendDispatchLocked(c, sess.seq, &event{t: "RESUMED", data: json.RawMessage(`{"_trace":["discordtest"]}`)}, false)
	s.nResumes++
	s.notifyLocked()
}

// dispatchLocked sends an event to the live connection, or queues it for
// the next RESUME (replay) or IDENTIFY (delivery after READY).
func (s *Server) dispatchLocked(ev *event) {
	sess := s.sess
	if sess == nil || sess.invalid {
		s.queued = append(s.queued, ev)
		s.notifyLocked()
		return
	}
	if ev.intent != 0 && sess.intents&ev.intent == 0 {
		return
	}
	sess.seq++
	sess.log = append(sess.log, logEntry{seq: sess.seq, ev: ev})
	if c := s.live; c != nil && c.sess == sess && !c.closed {
		s.sendDispatchLocked(c, sess.seq, ev, false)
	} else {
		s.queued = append(s.queued, ev)
	}
	s.notifyLocked()
}

func (s *Server) guildJSONLocked() json.RawMessage {
	g := &discordgo.Guild{
		ID:              s.opts.GuildID,
		Name:            "discordtest",
		OwnerID:         DefaultUserID,
		JoinedAt:        time.Now().UTC(),
		MemberCount:     2,
		Roles:           []*discordgo.Role{{ID: s.opts.GuildID, Name: "@everyone", Permissions: 0x6436641}},
		Emojis:          []*discordgo.Emoji{},
		Stickers:        []*discordgo.Sticker{},
		Members:         []*discordgo.Member{},
		Presences:       []*discordgo.Presence{},
		VoiceStates:     []*discordgo.VoiceState{},
		Features:        []discordgo.GuildFeature{},
		StageInstances:  []*discordgo.StageInstance{},
		PreferredLocale: "en-US",
		ApplicationID:   "",
		SystemChannelID: s.channelOrder[0],
	}
	for _, id := range s.channelOrder {
		g.Channels = append(g.Channels, s.channels[id].ch)
	}
	g.Threads = []*discordgo.Channel{}
	for _, id := range s.threadOrder {
		th := s.channels[id].ch
		if th.ThreadMetadata == nil || !th.ThreadMetadata.Archived {
			g.Threads = append(g.Threads, th)
		}
	}
	b, err := json.Marshal(g)
	if err != nil {
		panic("discordtest: encoding guild: " + err.Error())
	}
	return b
}

// Identified returns a channel closed at the first successful IDENTIFY,
// before its READY is sent.
func (s *Server) Identified() <-chan struct{} { return s.identified }

// Sessions returns how many IDENTIFYs succeeded.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nSessions
}

// Resumes returns how many RESUMEs succeeded.
func (s *Server) Resumes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nResumes
}

// Heartbeats returns how many op 1 heartbeats the gateway received.
func (s *Server) Heartbeats() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nHeartbeats
}

// Connected reports whether a client is identified or resumed on a live
// connection.
func (s *Server) Connected() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live != nil
}

// WaitConnected waits until a client is identified or resumed on a live
// connection.
func (s *Server) WaitConnected(ctx context.Context) error {
	return s.WaitFor(ctx, s.Connected)
}

// Dispatches returns every dispatch frame written so far, oldest first,
// including READY, RESUMED and replays.
func (s *Server) Dispatches() []Dispatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Dispatch, len(s.dispatches))
	copy(out, s.dispatches)
	return out
}

// DropConnection closes the live gateway connection: with a close frame
// carrying code, or, when code is 0, by closing the TCP connection so the
// client sees 1006 (abnormal closure). Close codes 4007 and 4009 also
// invalidate the session, so a later RESUME gets INVALID_SESSION; other codes
// leave it resumable. Dispatches made while no client is connected are
// queued: a RESUME replays them, a new IDENTIFY delivers them after READY.
// Without a live connection, DropConnection does nothing.
//
// With discordgo, cut a connection only after its first heartbeat arrived
// (Heartbeats() >= 1; for a later connection, Heartbeats() above its value
// right after the previous cut, as a dropped connection's heartbeats are not
// counted): until its heartbeat goroutine has sent one, a discordgo session
// that reconnects has that goroutine write to the dead connection
// afterwards, fail, and close the new connection with 1000, which ends the
// session (it then identifies anew). The same holds for SendReconnect.
func (s *Server) DropConnection(code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.live
	if c == nil {
		return
	}
	if (code == 4007 || code == 4009) && c.sess != nil {
		c.sess.invalid = true
	}
	if code != 0 && closeTexts[code] == "" {
		// An application close code without a Discord text.
		msg := websocket.FormatCloseMessage(code, "")
		_ = c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second))
		code = 0
	}
	s.closeConnLocked(c, code)
}

// SendReconnect sends op 7 RECONNECT on the live connection; the client is
// expected to close it and RESUME on a new one.
func (s *Server) SendReconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.live; c != nil {
		s.logf("gateway: sending RECONNECT")
		s.writeFrameLocked(c, opReconnect, nil, 0, "")
	}
}

// SkipAcks makes the live connection leave its next n heartbeats
// unacknowledged (a "zombie" connection); use a large n to stop
// acknowledging altogether. It applies to the current connection only.
func (s *Server) SkipAcks(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live != nil {
		s.live.skipAcks = n
	}
}
