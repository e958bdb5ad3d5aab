package discord

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/hooks"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/service"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// TestMain puts stand-ins for the agent types' programs on PATH (the
// service registers an agent only when its program resolves), and fails
// the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { servicetest.Main(m) }

// Ids of the test guild's people and channels.
const (
	botToken       = "test-token"
	controlChannel = "300000000000000001"
	projectChannel = "300000000000000002"
	alice          = "400000000000000001" // authorized
	root           = "400000000000000002" // admin
	mallory        = "400000000000000003" // nobody
)

// testService is the command layer for the bot's tests: the daemon's
// real service (servicetest: its orchestrator, hook and workflow engines
// over the harness's store), with an optional gate that holds ApproveTask
// to make it slow, and the tasks it approved.
type testService struct {
	*service.Service
	gate chan struct{}

	mu       sync.Mutex
	approved []string
}

func (s *testService) ApproveTask(ctx context.Context, id, by, note string) (models.TransitionResult, error) {
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return models.TransitionResult{}, ctx.Err()
		}
	}
	res, err := s.Service.ApproveTask(ctx, id, by, note)
	if err == nil {
		s.mu.Lock()
		s.approved = append(s.approved, id)
		s.mu.Unlock()
	}
	return res, err
}

// budgetWindow is the window of the harness's budget report.
const budgetWindow = 24 * time.Hour

// harnessLLM is the daemon's model in the harness's hook engines unless a
// test configures its own: the bot's forms make hooks that call an LLM,
// which the engine's check refuses when no model is configured. Nothing
// answers at its address: a test that runs such a hook serves its own.
var harnessLLM = hooks.LLMConfig{BaseURL: "http://127.0.0.1:9/v1", Model: "harness-model"}

// The harness's clocks move only when a test advances them (advance). The
// fake Discord measures interaction deadlines on clock, which stands
// still: however slow the machine, no callback is late. The bot's answer
// timers (Config.Clock's After) run on botClock, whose Now follows the real
// time (the store's outbox retries are due by it): no answer is deferred
// or look-up given up unless a test advances the clocks.

// harness runs a bot against the fake Discord and a real store.
type harness struct {
	t        testing.TB
	fake     *discordtest.Server
	st       *store.Store
	db       string // the store's database file
	kit      *servicetest.Kit
	svc      *testService
	bot      *Bot
	clock    *clocktest.Fake // the fake Discord's
	botClock *clocktest.Fake // the bot's
	// hub is the runners' connections the service asks, on clock.
	hub  *fleet.Hub
	stop func()
}

type harnessOption func(*Config, *discordtest.Options)

func newHarness(t testing.TB, opts ...harnessOption) *harness {
	t.Helper()
	return newHarnessWith(t, nil, opts...)
}

// newHarnessWith is newHarness with the store on storeClock (nil: the real
// clock): what is written and read through the store — the outbox's due
// times, the desk's marks — then follows that clock.
func newHarnessWith(t testing.TB, storeClock *clocktest.Fake, opts ...harnessOption) *harness {
	t.Helper()
	clock, botClock := clocktest.New(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)), clocktest.NewFollowing()
	fo := discordtest.Options{Token: botToken, Channels: []string{controlChannel, projectChannel}, Logf: t.Logf, Clock: clock}
	cfg := Config{Token: botToken, GuildID: discordtest.DefaultGuildID, ControlChannelID: controlChannel,
		AuthorizedUsers: []string{alice}, AdminUsers: []string{root}, PollInterval: 20 * time.Millisecond,
		ProgressInterval: time.Nanosecond, RetryBackoff: 10 * time.Millisecond, Clock: botClock}
	for _, o := range opts {
		o(&cfg, &fo)
	}
	fake := discordtest.New(fo)
	cfg.APIBaseURL = fake.URL()
	db := filepath.Join(t.TempDir(), "aq.db")
	so := []storetest.Option{storetest.WithPath(db)}
	if storeClock != nil {
		so = append(so, storetest.WithClock(storeClock))
	}
	hub := fleet.New(fleet.Config{Clock: clock})
	k := servicetest.New(t, servicetest.WithStoreOptions(so...), servicetest.WithHooks(hooks.Config{LLM: harnessLLM}),
		servicetest.WithService(func(c *service.Config) { c.Window, c.Runners = budgetWindow, hub }))
	h := &harness{t: t, fake: fake, st: k.Store, db: db, kit: k, svc: &testService{Service: k.Service}, clock: clock,
		botClock: botClock, hub: hub}
	h.bot = h.start(cfg)
	t.Cleanup(func() {
		h.stop()
		fake.Close()
	})
	return h
}

// advance moves the fake Discord's clock and the bot's by d.
func (h *harness) advance(d time.Duration) {
	h.clock.Advance(d)
	h.botClock.Advance(d)
}

// start runs a bot until stop is called.
func (h *harness) start(cfg Config) *Bot { return h.startWith(cfg, h.st) }

// startWith runs a bot on box until stop is called.
func (h *harness) startWith(cfg Config, box Outbox) *Bot {
	h.t.Helper()
	b, err := New(cfg, h.svc, box)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	wait := progresstest.Context(h.t)
	select {
	case <-b.Ready():
	case err := <-done:
		cancel()
		h.t.Fatalf("bot stopped before it was ready: %v", err)
	case <-wait.Done():
		cancel()
		h.t.Fatalf("bot not ready: %v", wait.Err())
	}
	var once sync.Once
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				h.t.Errorf("bot: %v", err)
			}
		})
	}
	return b
}

// ctx returns a context for one wait: it ends when the wait has seen no
// progress for progresstest's stall limit.
func (h *harness) ctx() context.Context { return progresstest.Context(h.t) }

// hookEngine gives the service a real hook engine of cfg (servicetest's
// UseHooks), with harnessLLM when cfg has no model of its own; runs still under way when the test ends are waited for before
// the store closes.
func (h *harness) hookEngine(cfg hooks.Config) *hooks.Engine {
	h.t.Helper()
	if cfg.LLM == (hooks.LLMConfig{}) {
		cfg.LLM = harnessLLM
	}
	return h.kit.UseHooks(cfg)
}

// workflowEngine gives the service a real workflow engine over the store
// and the orchestrator; its schedules are not run (nothing calls Run or
// Tick).
func (h *harness) workflowEngine() *workflow.Engine {
	h.t.Helper()
	return h.kit.UseWorkflows(workflow.Config{})
}

// project creates a project whose notices go to projectChannel; repo, when
// given, is its repository (a project's tasks may require approval only
// with one).
func (h *harness) project(id string, repo ...*models.RepoConfig) models.Project {
	h.t.Helper()
	ch := projectChannel
	pr := models.Project{ID: id, Name: "Project " + id, DiscordChannelID: &ch}
	if len(repo) > 0 {
		pr.Repo = repo[0]
	}
	p, err := h.st.CreateProject(context.Background(), pr)
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// task creates a task and returns its id.
func (h *harness) task(projectID, title string, deps ...string) string {
	h.t.Helper()
	bt := models.BatchTask{Title: title}
	for _, d := range deps {
		bt.Dependencies = append(bt.Dependencies, models.BatchDependency{ID: d})
	}
	res, err := h.st.CreateTasks(context.Background(), models.TaskBatch{ProjectID: projectID, Tasks: []models.BatchTask{bt}})
	if err != nil {
		h.t.Fatal(err)
	}
	return res[0].TaskID
}

// apply applies events to a task in order.
func (h *harness) apply(taskID string, events ...models.TaskEvent) {
	h.t.Helper()
	for _, e := range events {
		req := models.TransitionRequest{TaskID: taskID, Event: e, Reason: "test " + strings.ToLower(string(e))}
		if e == models.EventAssigned {
			req.AgentID = "agent-1"
		}
		if _, err := h.st.ApplyEvent(context.Background(), req); err != nil {
			h.t.Fatalf("apply %s to %s: %v", e, taskID, err)
		}
	}
}

// command sends a slash command from user and waits for n responses.
func (h *harness) command(user, channelID, name string, opts ...*discordgo.ApplicationCommandInteractionDataOption) *discordtest.Interaction {
	h.t.Helper()
	data := discordgo.ApplicationCommandInteractionData{Name: name, Options: opts}
	return h.fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionApplicationCommand, ChannelID: channelID,
		Member: &discordgo.Member{User: &discordgo.User{ID: user, Username: "user-" + user[len(user)-1:]}}, Data: data})
}

// sub builds a subcommand option with its options.
func subOpt(name string, opts ...*discordgo.ApplicationCommandInteractionDataOption) *discordgo.ApplicationCommandInteractionDataOption {
	return &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: discordgo.ApplicationCommandOptionSubCommand, Options: opts}
}

func strOpt(name, v string) *discordgo.ApplicationCommandInteractionDataOption {
	return &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: discordgo.ApplicationCommandOptionString, Value: v}
}

func intOpt(name string, v int) *discordgo.ApplicationCommandInteractionDataOption {
	return &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: discordgo.ApplicationCommandOptionInteger, Value: float64(v)}
}

func boolOpt(name string, v bool) *discordgo.ApplicationCommandInteractionDataOption {
	return &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: discordgo.ApplicationCommandOptionBoolean, Value: v}
}

// press presses the button with customID on message m.
func (h *harness) press(user string, m *discordgo.Message, customID string) *discordtest.Interaction {
	h.t.Helper()
	return h.fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionMessageComponent, ChannelID: m.ChannelID,
		Member:  &discordgo.Member{User: &discordgo.User{ID: user}},
		Message: &discordgo.Message{ID: m.ID, ChannelID: m.ChannelID},
		Data:    discordgo.MessageComponentInteractionData{CustomID: customID, ComponentType: discordgo.ButtonComponent}})
}

// submit submits a modal with one text input.
func (h *harness) submit(user, channelID, customID, value string) *discordtest.Interaction {
	h.t.Helper()
	return h.fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionModalSubmit, ChannelID: channelID,
		Member: &discordgo.Member{User: &discordgo.User{ID: user}},
		Data: discordgo.ModalSubmitInteractionData{CustomID: customID, Components: []discordgo.MessageComponent{
			&discordgo.ActionsRow{Components: []discordgo.MessageComponent{&discordgo.TextInput{CustomID: "text", Value: value}}}}}})
}

// answer waits for the interaction's first n responses and returns the
// last one's text (the callback's content, or the edited message's).
func (h *harness) answer(i *discordtest.Interaction, n int) (discordtest.Response, string) {
	h.t.Helper()
	rs, err := i.Wait(h.ctx(), n)
	if err != nil {
		h.t.Fatalf("waiting for %d responses: %v (got %+v)", n, err, i.Responses())
	}
	r := rs[n-1]
	switch {
	case r.Message != nil:
		return r, r.Message.Content
	case r.Data != nil:
		return r, r.Data.Content
	}
	return r, ""
}

// ephemeralFlag reports whether a callback was ephemeral.
func ephemeralFlag(r discordtest.Response) bool {
	return r.Data != nil && r.Data.Flags&discordgo.MessageFlagsEphemeral != 0
}

// waitMessage waits for a message in a channel that contains substr.
func (h *harness) waitMessage(channelID, substr string) *discordgo.Message {
	h.t.Helper()
	return h.waitMessageWith(channelID, substr)
}

// customIDs returns the custom ids of a message's buttons.
func customIDs(m *discordgo.Message) []string {
	var out []string
	for _, row := range m.Components {
		r, ok := row.(*discordgo.ActionsRow)
		if !ok {
			continue
		}
		for _, c := range r.Components {
			if b, ok := c.(*discordgo.Button); ok && b.CustomID != "" {
				out = append(out, b.CustomID)
			}
		}
	}
	return out
}

// buttonID returns the custom id of m's button whose id starts with prefix.
func (h *harness) buttonID(m *discordgo.Message, prefix string) string {
	h.t.Helper()
	for _, id := range customIDs(m) {
		if strings.HasPrefix(id, prefix) {
			return id
		}
	}
	h.t.Fatalf("message %q has no button %s… (has %v)", m.Content, prefix, customIDs(m))
	return ""
}

// taskStatus reads a task's status.
func (h *harness) taskStatus(id string) models.TaskStatus {
	h.t.Helper()
	t, err := h.st.GetTask(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return t.Status
}
