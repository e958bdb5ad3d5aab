package discordtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/clock"
)

// Defaults used when the corresponding Options field is left empty.
const (
	DefaultToken               = "discordtest-token"
	DefaultApplicationID       = "100000000000000001"
	DefaultBotUserID           = "100000000000000002"
	DefaultGuildID             = "200000000000000001"
	DefaultChannelID           = "300000000000000001"
	DefaultBotUsername         = "agentqueued"
	DefaultHeartbeatInterval   = 41250 * time.Millisecond
	DefaultInteractionDeadline = 3 * time.Second

	// DefaultUserID is the id of the human guild member the fake uses as the
	// author of SendMessage messages and the invoker of Interact interactions
	// when the caller does not name one.
	DefaultUserID = "400000000000000001"
	// DefaultUsername is that member's username.
	DefaultUsername = "tester"
)

// Options configures a Server. The zero value is usable: every empty field
// takes its default, the matching Default* constant (clock.Real for Clock).
type Options struct {
	// Token is the bot token. REST requests must carry
	// "Authorization: Bot <Token>"; the gateway accepts the IDENTIFY/RESUME
	// token with or without the "Bot " prefix.
	Token string
	// ApplicationID is the application (client) id; default DefaultApplicationID.
	ApplicationID string
	// BotUserID is the bot user's id; default DefaultBotUserID.
	BotUserID string
	// BotUsername is the bot user's name; default DefaultBotUsername.
	BotUsername string
	// GuildID is the id of the single guild the bot is in; default DefaultGuildID.
	GuildID string
	// Channels lists the ids of the guild's text channels, in order. The
	// first one is named "general", the others "channel-2", "channel-3"…
	// Default: one channel, DefaultChannelID.
	Channels []string
	// HeartbeatInterval is announced in HELLO (whole milliseconds, at least 1ms);
	// default DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// InteractionDeadline is how long after Interact the initial callback is
	// accepted; later callbacks get 404 {"code":10062}. Default
	// DefaultInteractionDeadline (Discord's 3 seconds).
	InteractionDeadline time.Duration
	// Clock is the clock interaction deadlines are measured on: Interact
	// reads it for the dispatch time (Interaction.Deadline is that plus
	// InteractionDeadline), an initial callback is refused as late when it
	// reads after the deadline, and Response.At is read from it. Default
	// clock.Real. A test that is not about the deadline can pass a clock
	// that stands still, so that no callback is late however slow the
	// machine; a test of the deadline can move a clock of its own past it
	// instead of waiting. Its Now is called with the server's lock held: it
	// must not call the Server's methods.
	Clock clock.Clock
	// Compress makes the gateway send every frame after IDENTIFY as a
	// per-message zlib binary frame when the client's IDENTIFY asked for
	// compression (discordgo does by default). Off: plain JSON text frames.
	Compress bool
	// DenyPrivilegedIntents makes IDENTIFY with a privileged intent
	// (GUILD_MEMBERS, GUILD_PRESENCES, MESSAGE_CONTENT) fail with close code
	// 4014 "Disallowed intent(s)", as for an application whose privileged
	// intents are not enabled in the developer portal.
	DenyPrivilegedIntents bool
	// Logf, if set, receives one line per REST request and gateway event,
	// for example t.Logf.
	Logf func(format string, args ...any)
}

// Request is one REST request the fake received, as recorded by Requests.
type Request struct {
	Method string
	Path   string // the URL path as received, e.g. "/api/v9/channels/1/messages"
	Query  string // the raw query, without "?"
	Status int    // the HTTP status answered (0 while it is served); 101 for a gateway upgrade
	Body   []byte // the raw request body
	Time   time.Time
}

// Server is a fake Discord: REST under /api/v9 and a gateway at /gateway,
// served by an httptest server on 127.0.0.1. All methods are safe for
// concurrent use.
type Server struct {
	opts  Options
	srv   *httptest.Server
	base  string
	wsURL string
	wg    sync.WaitGroup // gateway connection handlers

	mu         sync.Mutex
	changed    chan struct{}
	closed     bool
	transports []*http.Transport
	lastID     uint64

	// gateway
	conns       map[*gwConn]struct{}
	live        *gwConn
	sess        *gwSession
	sessions    map[string]*gwSession
	queued      []*event
	identified  chan struct{}
	nSessions   int
	nResumes    int
	nHeartbeats int
	dispatches  []Dispatch

	// REST
	requests []Request
	limits   []*rateLimitRule
	buckets  map[string]int

	// state
	channels       map[string]*chanRec
	channelOrder   []string
	threadOrder    []string
	messages       map[string]*msgRec
	attachments    map[string][]byte
	guildCommands  []*discordgo.ApplicationCommand
	globalCommands []*discordgo.ApplicationCommand
	commandWrites  int
	interactions   map[string]*Interaction
	tokens         map[string]*Interaction
}

// New starts a fake Discord server on 127.0.0.1. It panics on invalid
// options (ids that are not snowflakes, duplicate channels, negative
// durations). Close it when done, after closing the discordgo sessions that
// use it.
func New(opts Options) *Server {
	opts = withDefaults(opts)
	s := &Server{
		opts:         opts,
		changed:      make(chan struct{}),
		conns:        make(map[*gwConn]struct{}),
		sessions:     make(map[string]*gwSession),
		identified:   make(chan struct{}),
		buckets:      make(map[string]int),
		channels:     make(map[string]*chanRec),
		messages:     make(map[string]*msgRec),
		attachments:  make(map[string][]byte),
		interactions: make(map[string]*Interaction),
		tokens:       make(map[string]*Interaction),
	}
	for i, id := range opts.Channels {
		name := "general"
		if i > 0 {
			name = "channel-" + strconv.Itoa(i+1)
		}
		s.channels[id] = &chanRec{ch: &discordgo.Channel{
			ID:       id,
			GuildID:  opts.GuildID,
			Name:     name,
			Type:     discordgo.ChannelTypeGuildText,
			Position: i,
		}, nonces: make(map[string]nonceRec)}
		s.channelOrder = append(s.channelOrder, id)
	}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serveHTTP))
	s.base = s.srv.URL
	s.wsURL = "ws" + s.srv.URL[len("http"):] + "/gateway"
	return s
}

func withDefaults(o Options) Options {
	def := func(v *string, d string) {
		if *v == "" {
			*v = d
		}
	}
	def(&o.Token, DefaultToken)
	def(&o.ApplicationID, DefaultApplicationID)
	def(&o.BotUserID, DefaultBotUserID)
	def(&o.BotUsername, DefaultBotUsername)
	def(&o.GuildID, DefaultGuildID)
	if len(o.Channels) == 0 {
		o.Channels = []string{DefaultChannelID}
	} else {
		o.Channels = append([]string(nil), o.Channels...)
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.InteractionDeadline == 0 {
		o.InteractionDeadline = DefaultInteractionDeadline
	}
	o.Clock = clock.Or(o.Clock)
	for name, id := range map[string]string{
		"ApplicationID": o.ApplicationID, "BotUserID": o.BotUserID, "GuildID": o.GuildID,
	} {
		if !isSnowflake(id) {
			panic(fmt.Sprintf("discordtest: Options.%s %q is not a snowflake", name, id))
		}
	}
	seen := map[string]bool{o.ApplicationID: true, o.BotUserID: true, o.GuildID: true, DefaultUserID: true}
	for _, id := range o.Channels {
		if !isSnowflake(id) {
			panic(fmt.Sprintf("discordtest: channel id %q is not a snowflake", id))
		}
		if seen[id] {
			panic(fmt.Sprintf("discordtest: channel id %q is used twice", id))
		}
		seen[id] = true
	}
	if o.HeartbeatInterval < time.Millisecond {
		panic("discordtest: Options.HeartbeatInterval must be at least 1ms")
	}
	if o.InteractionDeadline < 0 {
		panic("discordtest: Options.InteractionDeadline must not be negative")
	}
	return o
}

func isSnowflake(id string) bool {
	if id == "" || len(id) > 20 {
		return false
	}
	_, err := strconv.ParseUint(id, 10, 64)
	return err == nil
}

// URL returns the server's base URL, http://127.0.0.1:PORT. Point discordgo
// at it by rewriting requests for https://discord.com to this scheme and host
// (keeping the path), or use Client.
func (s *Server) URL() string { return s.base }

// GatewayURL returns the websocket URL announced by GET /api/v9/gateway.
func (s *Server) GatewayURL() string { return s.wsURL }

// Config returns the effective options, defaults filled in.
func (s *Server) Config() Options {
	o := s.opts
	o.Channels = append([]string(nil), o.Channels...)
	return o
}

// Client returns an *http.Client whose transport sends requests for
// discord.com to the fake (any other host is refused). Assign it to
// discordgo's Session.Client. Close releases its idle connections.
func (s *Server) Client() *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second}
	s.mu.Lock()
	s.transports = append(s.transports, tr)
	s.mu.Unlock()
	u, _ := url.Parse(s.base)
	return &http.Client{Transport: &rewriteTransport{base: u, next: tr}, Timeout: 20 * time.Second}
}

type rewriteTransport struct {
	base *url.URL
	next http.RoundTripper
}

// RoundTrip sends a discord.com request to the fake's address instead.
func (t *rewriteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host != "discord.com" {
		return nil, fmt.Errorf("discordtest: refusing request to %s", r.URL.Host)
	}
	r2 := r.Clone(r.Context())
	r2.URL.Scheme = t.base.Scheme
	r2.URL.Host = t.base.Host
	r2.Host = t.base.Host
	return t.next.RoundTrip(r2)
}

// Close closes every gateway connection (abruptly, as a network failure
// would), waits for their handlers, and shuts the HTTP server down. Close the
// discordgo sessions first: a session whose connection drops keeps trying to
// reconnect. Close is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	conns := make([]*gwConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.live = nil
	s.notifyLocked()
	trs := s.transports
	s.mu.Unlock()
	for _, c := range conns {
		c.ws.Close()
	}
	s.wg.Wait()
	s.srv.Close()
	for _, tr := range trs {
		tr.CloseIdleConnections()
	}
}

// Changed returns a channel that is closed at the next recorded change of
// the fake's state: a REST request, a gateway connection, IDENTIFY, RESUME,
// heartbeat or dispatch, a message, an interaction response. Take the
// channel, check your condition, then wait on it; or use WaitFor.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// WaitFor waits until cond returns true, re-evaluating it after every change
// (see Changed). cond may call the Server's methods. It returns ctx.Err() if
// the context ends first.
func (s *Server) WaitFor(ctx context.Context, cond func() bool) error {
	for {
		ch := s.Changed()
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *Server) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *Server) logf(format string, args ...any) {
	if s.opts.Logf != nil {
		s.opts.Logf("discordtest: "+format, args...)
	}
}

// Requests returns the log of REST requests (and gateway upgrade requests),
// oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	copy(out, s.requests)
	return out
}

const discordEpochMS = 1420070400000

// newIDLocked returns a fresh snowflake whose timestamp is now.
func (s *Server) newIDLocked() string {
	id := uint64(time.Now().UnixMilli()-discordEpochMS) << 22
	if id <= s.lastID {
		id = s.lastID + 1
	}
	s.lastID = id
	return strconv.FormatUint(id, 10)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

func (s *Server) botUser() *discordgo.User {
	return &discordgo.User{
		ID:            s.opts.BotUserID,
		Username:      s.opts.BotUsername,
		Discriminator: "0",
		Bot:           true,
		Verified:      true,
	}
}

func defaultUser() *discordgo.User {
	return &discordgo.User{ID: DefaultUserID, Username: DefaultUsername, GlobalName: "Tester", Discriminator: "0"}
}
