package discord

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Defaults of the bot's configuration.
const (
	// DefaultAPIBaseURL is Discord's own address; the gateway URL is
	// discovered through it.
	DefaultAPIBaseURL = "https://discord.com"
	// DefaultAckAfter is how long an interaction's operation may run before
	// the bot defers its answer (Discord allows 3 s for the first answer).
	DefaultAckAfter = 1500 * time.Millisecond
	// DefaultOperationTimeout bounds an operation started from Discord
	// (a deferred answer may be edited for 15 minutes).
	DefaultOperationTimeout = 10 * time.Minute
	// DefaultPollInterval is how often the outbox is read when nothing wakes
	// the bot earlier.
	DefaultPollInterval = time.Second
	// DefaultProgressInterval is the least time between two progress posts
	// in one task's thread; lines that arrive meanwhile are posted together.
	DefaultProgressInterval = 5 * time.Second
	// DefaultRetryBackoff is the first wait before a failed delivery is
	// tried again; it doubles up to DefaultMaxRetryBackoff.
	DefaultRetryBackoff = 5 * time.Second
	// DefaultMaxRetryBackoff caps the wait between delivery attempts.
	DefaultMaxRetryBackoff = 10 * time.Minute
	// DefaultMaxDeliveryAttempts is how often a notice is tried before it is
	// given up (and logged with its text's kind and task).
	DefaultMaxDeliveryAttempts = 12
	// DefaultHTTPTimeout bounds one REST request.
	DefaultHTTPTimeout = 30 * time.Second
	// DefaultReconnectBackoff is the first wait before connecting again
	// after the gateway could not be reached at start.
	DefaultReconnectBackoff = 2 * time.Second
)

// Config configures a Bot.
type Config struct {
	// Token is the bot's token (without the "Bot " prefix). Required.
	Token string
	// GuildID is the server whose slash commands the bot registers. Required.
	GuildID string
	// ControlChannelID receives the notices of projects without a channel
	// of their own. Required.
	ControlChannelID string
	// AuthorizedUsers may use the bot; AdminUsers may also run destructive
	// commands (delete, stop, archive, remove). Nobody else may act.
	AuthorizedUsers []string
	AdminUsers      []string
	// APIBaseURL is where Discord's REST API is reached (a proxy, or a fake
	// in tests); default DefaultAPIBaseURL.
	APIBaseURL string
	// Proposer turns a message that mentions the bot into one command;
	// nil means such messages get a short help text.
	Proposer Proposer

	Logger *slog.Logger
	// Now is the clock of the outbox's retries and progress coalescing;
	// default time.Now.
	Now func() time.Time
	// After is the timer of what races Discord's 3-second deadline for an
	// interaction's first answer: the bot defers the answer when
	// After(AckAfter) fires before the operation is done, and gives up a
	// look-up before a form opens (answerLookup) when its timer fires;
	// default time.After.
	After func(time.Duration) <-chan time.Time

	AckAfter            time.Duration
	OperationTimeout    time.Duration
	PollInterval        time.Duration
	ProgressInterval    time.Duration
	RetryBackoff        time.Duration
	MaxRetryBackoff     time.Duration
	MaxDeliveryAttempts int
	HTTPTimeout         time.Duration
	ReconnectBackoff    time.Duration
}

// Service is what the bot needs from the daemon's command layer: the same
// operations the API offers people.
type Service interface {
	ListProjects(ctx context.Context) ([]models.Project, error)
	GetProject(ctx context.Context, id string) (models.Project, error)
	CreateProject(ctx context.Context, p models.Project) (models.Project, error)
	UpdateProject(ctx context.Context, id string, patch models.ProjectPatch) (models.Project, error)
	CreateTasks(ctx context.Context, b models.TaskBatch) ([]models.BatchResult, error)
	GetTaskDetail(ctx context.Context, id string) (models.TaskDetail, error)
	ListTasks(ctx context.Context, f models.TaskFilter) ([]models.Task, error)
	ApplyEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error)
	RegisterAgent(ctx context.Context, a models.Agent) (models.Agent, error)
	ListAgents(ctx context.Context) ([]models.Agent, error)
	SetAgentPaused(ctx context.Context, id string, paused bool) (models.Agent, error)
	OpenQuestions(ctx context.Context) ([]models.Question, error)
	TaskQuestions(ctx context.Context, taskID string) ([]models.Question, error)
	AnswerQuestion(ctx context.Context, id int64, answer, by string) (models.Question, error)
	ApproveTask(ctx context.Context, id, by, note string) (models.TransitionResult, error)
	RejectTask(ctx context.Context, id, by, feedback string) (models.TransitionResult, error)
	RunErrors(ctx context.Context, taskID string) ([]string, error)
	Verifications(ctx context.Context, phases ...models.VerificationPhase) ([]models.Verification, error)
	TaskCounts(ctx context.Context) (map[string]map[models.TaskStatus]int, error)
	// Overview is the daemon's state at a glance (shown by /status).
	Overview(ctx context.Context) (models.Overview, error)
	TaskDiff(ctx context.Context, taskID string) (string, error)
	EditTask(ctx context.Context, id string, patch models.TaskPatch) (models.Task, error)
	ChangeDependencies(ctx context.Context, id string, change models.DependencyChange) (models.DependencyResult, error)
	DeleteTask(ctx context.Context, id string) error
	RemoveAgent(ctx context.Context, id string) error
	Budget(ctx context.Context) (models.BudgetReport, error)
	// Rules returns the scheduling rules in force (shown by /status).
	Rules(ctx context.Context) (models.RuleSet, error)
	// Hooks; answers carry no secrets (API keys are redacted).
	ListHooks(ctx context.Context, projectID string) ([]models.Hook, error)
	GetHook(ctx context.Context, id string) (models.Hook, error)
	CreateHook(ctx context.Context, h models.Hook) (models.Hook, error)
	UpdateHook(ctx context.Context, id string, p models.HookPatch) (models.Hook, error)
	DeleteHook(ctx context.Context, id string) error
	FireHook(ctx context.Context, id, by string, f models.HookFire) (models.HookRun, error)
	ListHookRuns(ctx context.Context, f models.HookRunFilter) ([]models.HookRun, error)
	// Workflows and their runs; by is who acts ("discord:<user id>").
	ListWorkflows(ctx context.Context, projectID string) ([]models.Workflow, error)
	GetWorkflow(ctx context.Context, name string) (models.Workflow, error)
	StartRun(ctx context.Context, name, by string) (models.WorkflowRun, error)
	ListWorkflowRuns(ctx context.Context, f models.RunFilter) ([]models.WorkflowRun, error)
	GetWorkflowRun(ctx context.Context, id string) (models.WorkflowRun, error)
	CancelRun(ctx context.Context, id, by string) (models.WorkflowRun, error)
	RetryRun(ctx context.Context, id, by string) (models.WorkflowRun, error)
	RunTasks(ctx context.Context, runID string) ([]models.RunTask, error)
}

// Outbox is what the bot needs to deliver notices and keep task threads.
type Outbox interface {
	PendingOutboxAfter(ctx context.Context, afterID int64, limit int) ([]models.OutboxMessage, error)
	MarkOutboxDelivered(ctx context.Context, id int64) error
	MarkOutboxFailed(ctx context.Context, id int64, retryAt time.Time, reason string) error
	MarkOutboxPart(ctx context.Context, id int64, parts int) error
	GiveUpOutbox(ctx context.Context, id int64, reason string) error
	ForgetTaskThread(ctx context.Context, taskID, threadID string) error
	TaskThread(ctx context.Context, taskID string) (models.ChatThread, bool, error)
	SaveTaskThread(ctx context.Context, t models.ChatThread) (models.ChatThread, error)
	ThreadTask(ctx context.Context, threadID string) (string, bool, error)
}

// Bot is the Discord side of the daemon: slash commands, buttons and
// modals in, notices and task threads out.
type Bot struct {
	cfg  Config
	svc  Service
	box  Outbox
	log  *slog.Logger
	wake chan struct{}

	mu        sync.Mutex
	session   *discordgo.Session
	appID     string
	botUserID string
	ctx       context.Context // Run's context, for handlers
	inflight  sync.WaitGroup
	closing   bool
	lastPost  map[string]time.Time // task id → last progress post
	proposals map[string]proposal
	forms     map[string]hookForm // hook forms open or waiting for a retry
	ready     chan struct{}
	// runMu serialises run retries, so a Retry button pressed twice finds
	// what the first press did.
	runMu sync.Mutex
}

// New returns a bot for the given configuration. It starts nothing: call Run.
func New(cfg Config, svc Service, box Outbox) (*Bot, error) {
	if svc == nil || box == nil {
		return nil, errors.New("new discord bot: service and outbox are required")
	}
	switch {
	case cfg.Token == "":
		return nil, models.Errorf(models.CodeInvalid, "discord.token: required")
	case cfg.GuildID == "":
		return nil, models.Errorf(models.CodeInvalid, "discord.guild_id: required")
	case cfg.ControlChannelID == "":
		return nil, models.Errorf(models.CodeInvalid, "discord.control_channel_id: required")
	}
	if cfg.APIBaseURL == "" {
		cfg.APIBaseURL = DefaultAPIBaseURL
	}
	u, err := url.Parse(cfg.APIBaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, models.Errorf(models.CodeInvalid, "discord.api_base_url: %q is not an http(s) URL", cfg.APIBaseURL)
	}
	cfg.APIBaseURL = strings.TrimSuffix(cfg.APIBaseURL, "/")
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.After == nil {
		cfg.After = time.After
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&cfg.AckAfter, DefaultAckAfter}, {&cfg.OperationTimeout, DefaultOperationTimeout},
		{&cfg.PollInterval, DefaultPollInterval}, {&cfg.RetryBackoff, DefaultRetryBackoff},
		{&cfg.MaxRetryBackoff, DefaultMaxRetryBackoff}, {&cfg.HTTPTimeout, DefaultHTTPTimeout},
		{&cfg.ReconnectBackoff, DefaultReconnectBackoff}} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if cfg.ProgressInterval < 0 {
		return nil, errors.New("new discord bot: ProgressInterval is negative")
	}
	if cfg.ProgressInterval == 0 {
		cfg.ProgressInterval = DefaultProgressInterval
	}
	if cfg.MaxDeliveryAttempts <= 0 {
		cfg.MaxDeliveryAttempts = DefaultMaxDeliveryAttempts
	}
	return &Bot{cfg: cfg, svc: svc, box: box, log: cfg.Logger, wake: make(chan struct{}, 1),
		lastPost: map[string]time.Time{}, proposals: map[string]proposal{}, forms: map[string]hookForm{}, ready: make(chan struct{})}, nil
}

// Wake makes the bot read the outbox now; it never blocks.
func (b *Bot) Wake() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// Ready is closed once the bot is connected and its commands are registered.
func (b *Bot) Ready() <-chan struct{} { return b.ready }

// Run connects to Discord, registers the slash commands, answers
// interactions and delivers the outbox until ctx is cancelled.
func (b *Bot) Run(ctx context.Context) error {
	s, err := b.connect(ctx)
	if err != nil || s == nil {
		return err
	}
	b.log.Info("discord connected", "app_id", b.appID, "guild_id", b.cfg.GuildID,
		"authorized_users", len(b.cfg.AuthorizedUsers), "admin_users", len(b.cfg.AdminUsers))
	close(b.ready)
	b.deliverLoop(ctx)

	b.mu.Lock()
	b.closing = true
	b.mu.Unlock()
	b.inflight.Wait()
	if err := closeSession(s); err != nil {
		b.log.Warn("close discord session", "err", err)
	}
	return nil
}

// connect opens the gateway and registers the commands, trying again with
// backoff while Discord cannot be reached; a refused token is an error.
func (b *Bot) connect(ctx context.Context) (*discordgo.Session, error) {
	backoff := b.cfg.ReconnectBackoff
	intents := discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentMessageContent
	for {
		s, err := b.open(ctx, intents)
		if err == nil {
			return s, nil
		}
		var closed *websocket.CloseError
		if errors.As(err, &closed) && closed.Code == closeDisallowedIntents && intents&discordgo.IntentMessageContent != 0 {
			b.log.Warn("discord refused the message content intent: replies in task threads cannot answer questions " +
				"(enable \"Message Content Intent\" for the bot in Discord's developer portal); buttons and commands still work")
			intents &^= discordgo.IntentMessageContent
			continue
		}
		var rest *discordgo.RESTError
		if errors.As(err, &rest) && rest.Response != nil &&
			(rest.Response.StatusCode == http.StatusUnauthorized || rest.Response.StatusCode == http.StatusForbidden) {
			return nil, fmt.Errorf("discord refused the bot (check discord.token and the bot's access to guild %s): %w", b.cfg.GuildID, err)
		}
		if errors.Is(err, discordgo.ErrUnauthorized) {
			return nil, fmt.Errorf("discord refused discord.token: %w", err)
		}
		b.log.Warn("discord not reachable; trying again", "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil
		case <-t.C:
		}
		backoff = min(backoff*2, time.Minute)
	}
}

// closeDisallowedIntents is the gateway's close code for privileged
// intents the application may not use.
const closeDisallowedIntents = 4014

func (b *Bot) open(ctx context.Context, intents discordgo.Intent) (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + b.cfg.Token)
	if err != nil {
		return nil, err
	}
	s.Client = &http.Client{Transport: rewrite{base: b.cfg.APIBaseURL}, Timeout: b.cfg.HTTPTimeout}
	s.Dialer = websocket.DefaultDialer
	s.Identify.Intents = intents
	s.LogLevel = discordgo.LogError
	b.mu.Lock()
	b.ctx = ctx
	b.mu.Unlock()
	s.AddHandler(func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		b.dispatch(func(ctx context.Context) { b.handleInteraction(ctx, s, ic.Interaction) })
	})
	s.AddHandler(func(s *discordgo.Session, m *discordgo.MessageCreate) {
		b.dispatch(func(ctx context.Context) { b.handleMessage(ctx, s, m.Message) })
	})
	if err := s.Open(); err != nil {
		return nil, err
	}
	app := s.State.Application
	if app == nil || app.ID == "" || s.State.User == nil {
		_ = closeSession(s)
		return nil, errors.New("discord READY carried no application or user")
	}
	b.mu.Lock()
	b.session, b.appID, b.botUserID = s, app.ID, s.State.User.ID
	b.mu.Unlock()
	if _, err := s.ApplicationCommandBulkOverwrite(app.ID, b.cfg.GuildID, commandDefinitions(), discordgo.WithContext(ctx)); err != nil {
		_ = closeSession(s)
		return nil, fmt.Errorf("register slash commands in guild %s: %w", b.cfg.GuildID, err)
	}
	return s, nil
}

// dispatch runs a handler unless the bot is shutting down, so Run can wait
// for the handlers it let in.
func (b *Bot) dispatch(fn func(ctx context.Context)) {
	b.mu.Lock()
	if b.closing || b.ctx == nil {
		b.mu.Unlock()
		return
	}
	ctx := b.ctx
	b.inflight.Add(1)
	b.mu.Unlock()
	defer b.inflight.Done()
	defer func() {
		if p := recover(); p != nil {
			b.log.Error("discord handler panicked", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	fn(ctx)
}

// closeSession closes a session for good: without turning reconnects off
// first, a heartbeat racing Close (which holds the lock through a
// one-second sleep) reconnects the closed session forever.
func closeSession(s *discordgo.Session) error {
	s.Lock()
	s.ShouldReconnectOnError = false
	s.Unlock()
	return s.Close()
}

// authorized reports whether a Discord user may act; admin whether they
// may run destructive commands.
func (b *Bot) authorized(userID string) bool {
	return userID != "" && (slices.Contains(b.cfg.AuthorizedUsers, userID) || slices.Contains(b.cfg.AdminUsers, userID))
}

func (b *Bot) admin(userID string) bool {
	return userID != "" && slices.Contains(b.cfg.AdminUsers, userID)
}

// rewrite sends requests for discord.com to the configured base URL.
type rewrite struct{ base string }

func (r rewrite) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.base == DefaultAPIBaseURL || req.URL.Host != "discord.com" {
		return http.DefaultTransport.RoundTrip(req)
	}
	u, err := url.Parse(r.base + req.URL.Path)
	if err != nil {
		return nil, err
	}
	u.RawQuery = req.URL.RawQuery
	out := req.Clone(req.Context())
	out.URL, out.Host = u, u.Host
	return http.DefaultTransport.RoundTrip(out)
}
