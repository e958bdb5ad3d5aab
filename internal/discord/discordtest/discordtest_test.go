package discordtest_test

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

func TestMain(m *testing.M) {
	// The gateway tests spend their time in discordgo's one-second sleep in
	// Session.Close, not on the CPU: unless -parallel was given, run more of
	// them at once than the default GOMAXPROCS.
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		_ = flag.Set("test.parallel", "16")
	}
	goleak.VerifyTestMain(m)
}

const testToken = "test-token"

// stoppedAt is when the clock of the fakes stands: a date no real clock
// reads while these tests run, so that a deadline measured on the real
// clock instead would show.
var stoppedAt = time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)

// newFake starts a fake for a test. Unless opts says otherwise, its clock
// stands still: only a test about the interaction deadline brings a clock
// that moves.
func newFake(t *testing.T, opts discordtest.Options) *discordtest.Server {
	t.Helper()
	if opts.Token == "" {
		opts.Token = testToken
	}
	if opts.Clock == nil {
		// A clock that stands still: interaction deadlines measured on it
		// never pass, however slow the machine.
		opts.Clock = clocktest.New(stoppedAt)
	}
	opts.Logf = t.Logf
	f := discordtest.New(opts)
	t.Cleanup(f.Close)
	return f
}

// restSession returns a discordgo session that talks REST to the fake.
func restSession(t *testing.T, f *discordtest.Server) *discordgo.Session {
	t.Helper()
	s, err := discordgo.New("Bot " + f.Config().Token)
	if err != nil {
		t.Fatal(err)
	}
	s.Client = f.Client()
	s.Dialer = websocket.DefaultDialer
	s.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages | discordgo.IntentMessageContent
	return s
}

// open opens the gateway connection and closes it at cleanup (before the
// fake, which was registered earlier).
func open(t *testing.T, s *discordgo.Session) {
	t.Helper()
	if err := s.Open(); err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { closeSession(s) })
}

// closeSession closes a discordgo session for good. Close holds the session
// lock through a one-second sleep; a heartbeat goroutine that was waiting for
// that lock then writes to the closed connection and starts reconnecting.
// Turning reconnection off first (under the lock, which orders the write
// after any reconnect in progress) ends that goroutine instead.
func closeSession(s *discordgo.Session) {
	s.Lock()
	s.ShouldReconnectOnError = false
	s.Unlock()
	_ = s.Close()
}

// receive waits for a value on ch for as long as progresstest allows one
// wait.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-progresstest.Context(t).Done():
		var zero T
		t.Fatalf("timed out waiting for %T", zero)
		return zero
	}
}

func restError(t *testing.T, err error, status, code int) *discordgo.RESTError {
	t.Helper()
	var re *discordgo.RESTError
	if !errors.As(err, &re) {
		t.Fatalf("want a REST error %d/%d, got %v", status, code, err)
	}
	if re.Response.StatusCode != status || re.Message == nil || re.Message.Code != code {
		t.Fatalf("want HTTP %d code %d, got %s", status, code, re.Error())
	}
	return re
}

// formErrors flattens a 50035 body into "path" -> error codes.
func formErrors(t *testing.T, re *discordgo.RESTError) map[string][]string {
	t.Helper()
	var body struct {
		Errors map[string]any `json:"errors"`
	}
	if err := json.Unmarshal(re.ResponseBody, &body); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	var walk func(path string, node map[string]any)
	walk = func(path string, node map[string]any) {
		for k, v := range node {
			if k == "_errors" {
				for _, e := range v.([]any) {
					out[path] = append(out[path], e.(map[string]any)["code"].(string))
				}
				continue
			}
			p := k
			if path != "" {
				p = path + "." + k
			}
			walk(p, v.(map[string]any))
		}
	}
	walk("", body.Errors)
	return out
}

func wantFormError(t *testing.T, err error, path, code string) {
	t.Helper()
	re := restError(t, err, http.StatusBadRequest, 50035)
	errs := formErrors(t, re)
	for _, c := range errs[path] {
		if c == code {
			return
		}
	}
	t.Fatalf("want %s at %q, got %v", code, path, errs)
}

func ptr[T any](v T) *T { return &v }

// handshakeHeartbeat is TestGatewayHandshakeAndHeartbeat's heartbeat
// interval. discordgo gives up on a connection when it has processed no ACK
// for 5 intervals: 2 s leaves a loaded machine 10 s to schedule the
// goroutines that read an ACK, where a short interval made the test
// reconnect spuriously.
const handshakeHeartbeat = 2 * time.Second

func TestGatewayHandshakeAndHeartbeat(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{HeartbeatInterval: handshakeHeartbeat})
	cfg := f.Config()
	dg := restSession(t, f)
	ready := make(chan *discordgo.Ready, 1)
	guild := make(chan *discordgo.GuildCreate, 1)
	dg.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { ready <- r })
	dg.AddHandler(func(_ *discordgo.Session, g *discordgo.GuildCreate) { guild <- g })
	open(t, dg)
	opened := time.Now().UTC()

	select {
	case <-f.Identified():
	default:
		t.Fatal("Identified not closed after Open")
	}
	r := receive(t, ready)
	if r.User == nil || r.User.ID != cfg.BotUserID || !r.User.Bot || r.Application == nil || r.Application.ID != cfg.ApplicationID || r.SessionID == "" {
		t.Fatalf("unexpected READY %+v", r)
	}
	g := receive(t, guild)
	if g.ID != cfg.GuildID || len(g.Channels) != 1 || g.Channels[0].ID != discordtest.DefaultChannelID || g.Channels[0].Name != "general" {
		t.Fatalf("unexpected GUILD_CREATE %+v", g.Guild)
	}

	// Heartbeats keep coming (the first one at once, two more a heartbeat
	// interval apart), and discordgo processes an ACK after Open: its
	// LastHeartbeatAck moves. Reading an ACK signals nothing the fake sees,
	// so the condition is evaluated again at each heartbeat until it holds.
	lastAck := func() time.Time {
		dg.RLock()
		defer dg.RUnlock()
		return dg.LastHeartbeatAck
	}
	if err := f.WaitFor(progresstest.Context(t), func() bool { return f.Heartbeats() >= 3 && lastAck().After(opened) }); err != nil {
		t.Fatalf("heartbeats %d, last ACK processed %v, opened %v: %v", f.Heartbeats(), lastAck(), opened, err)
	}
	// One session throughout: discordgo never gave up on the connection.
	if f.Sessions() != 1 || f.Resumes() != 0 || !f.Connected() {
		t.Fatalf("sessions=%d resumes=%d connected=%v", f.Sessions(), f.Resumes(), f.Connected())
	}

	var paths []string
	for _, r := range f.Requests() {
		paths = append(paths, fmt.Sprintf("%s %s?%s %d", r.Method, r.Path, r.Query, r.Status))
	}
	want := []string{"GET /api/v9/gateway? 200", "GET /gateway/?v=9&encoding=json 101"}
	if strings.Join(paths, "|") != strings.Join(want, "|") {
		t.Fatalf("requests %q, want %q", paths, want)
	}
}

func TestCommandsBulkOverwrite(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{})
	cfg := f.Config()
	dg := restSession(t, f)
	cmds := []*discordgo.ApplicationCommand{
		{Name: "task", Description: "Manage tasks", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "add", Description: "Add a task", Options: []*discordgo.ApplicationCommandOption{
				{Type: discordgo.ApplicationCommandOptionString, Name: "title", Description: "Title", Required: true},
				{Type: discordgo.ApplicationCommandOptionString, Name: "repo", Description: "Repository", Autocomplete: true},
			}},
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "list", Description: "List tasks"},
		}},
		{Name: "status", Description: "Show status"},
	}
	got, err := dg.ApplicationCommandBulkOverwrite(cfg.ApplicationID, cfg.GuildID, cmds)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID == "" || got[0].ApplicationID != cfg.ApplicationID || got[0].GuildID != cfg.GuildID || got[0].Type != discordgo.ChatApplicationCommand {
		t.Fatalf("unexpected commands %+v", got)
	}
	statusID := got[1].ID
	if f.CommandWrites() != 1 || len(f.Commands()) != 2 || f.Commands()[0].Options[0].Options[0].Name != "title" {
		t.Fatalf("writes=%d commands=%+v", f.CommandWrites(), f.Commands())
	}

	got, err = dg.ApplicationCommandBulkOverwrite(cfg.ApplicationID, cfg.GuildID, cmds[1:])
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != statusID {
		t.Fatalf("the overwrite must keep the id of an unchanged command: %+v", got)
	}
	listed, err := dg.ApplicationCommands(cfg.ApplicationID, cfg.GuildID)
	if err != nil || len(listed) != 1 || listed[0].Name != "status" {
		t.Fatalf("list: %v %+v", err, listed)
	}
	global, err := dg.ApplicationCommands(cfg.ApplicationID, "")
	if err != nil || len(global) != 0 {
		t.Fatalf("global commands: %v %+v", err, global)
	}

	choices := make([]*discordgo.ApplicationCommandOptionChoice, 26)
	for i := range choices {
		choices[i] = &discordgo.ApplicationCommandOptionChoice{Name: fmt.Sprint("c", i), Value: fmt.Sprint(i)}
	}
	bad := []struct {
		name, path, code string
		cmd              *discordgo.ApplicationCommand
	}{
		{"upper case", "0.name", "APPLICATION_COMMAND_INVALID_NAME", &discordgo.ApplicationCommand{Name: "Task", Description: "d"}},
		{"long name", "0.name", "BASE_TYPE_BAD_LENGTH", &discordgo.ApplicationCommand{Name: strings.Repeat("a", 33), Description: "d"}},
		{"no description", "0.description", "BASE_TYPE_BAD_LENGTH", &discordgo.ApplicationCommand{Name: "x"}},
		{"long description", "0.description", "BASE_TYPE_BAD_LENGTH", &discordgo.ApplicationCommand{Name: "x", Description: strings.Repeat("d", 101)}},
		{"mixed sub-commands", "0.options", "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", &discordgo.ApplicationCommand{Name: "x", Description: "d", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "a", Description: "d"},
			{Type: discordgo.ApplicationCommandOptionString, Name: "b", Description: "d"},
		}}},
		{"group in sub-command", "0.options.0.options.0.type", "APPLICATION_COMMAND_OPTIONS_TYPE_INVALID", &discordgo.ApplicationCommand{Name: "x", Description: "d", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionSubCommand, Name: "a", Description: "d", Options: []*discordgo.ApplicationCommandOption{
				{Type: discordgo.ApplicationCommandOptionSubCommandGroup, Name: "g", Description: "d"},
			}},
		}}},
		{"required after optional", "0.options.1.required", "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID", &discordgo.ApplicationCommand{Name: "x", Description: "d", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionString, Name: "a", Description: "d"},
			{Type: discordgo.ApplicationCommandOptionString, Name: "b", Description: "d", Required: true},
		}}},
		{"too many choices", "0.options.0.choices", "BASE_TYPE_MAX_LENGTH", &discordgo.ApplicationCommand{Name: "x", Description: "d", Options: []*discordgo.ApplicationCommandOption{
			{Type: discordgo.ApplicationCommandOptionString, Name: "a", Description: "d", Choices: choices},
		}}},
	}
	for _, b := range bad {
		_, err := dg.ApplicationCommandBulkOverwrite(cfg.ApplicationID, cfg.GuildID, []*discordgo.ApplicationCommand{b.cmd})
		t.Run(b.name, func(t *testing.T) { wantFormError(t, err, b.path, b.code) })
	}
	many := make([]*discordgo.ApplicationCommand, 101)
	for i := range many {
		many[i] = &discordgo.ApplicationCommand{Name: fmt.Sprint("c", i), Description: "d"}
	}
	_, err = dg.ApplicationCommandBulkOverwrite(cfg.ApplicationID, cfg.GuildID, many)
	wantFormError(t, err, "", "APPLICATION_COMMANDS_TOO_MANY")
	if f.CommandWrites() != 2 || len(f.Commands()) != 1 {
		t.Fatalf("refused overwrites must not change the commands: writes=%d", f.CommandWrites())
	}
	_, err = dg.ApplicationCommandBulkOverwrite("999", cfg.GuildID, cmds)
	restError(t, err, http.StatusForbidden, 50001)
}

// TestInteractionFlow answers a slash command with a deferred response, an
// edit and a follow-up, then a button click with an update, then an
// ephemeral reply, all through discordgo's handlers.
func TestInteractionFlow(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{})
	ch := discordtest.DefaultChannelID
	dg := restSession(t, f)
	errs := make(chan error, 10)
	userMessages := make(chan *discordgo.Message, 10)
	dg.AddHandler(func(s *discordgo.Session, m *discordgo.MessageCreate) {
		if m.Author.ID != s.State.User.ID {
			userMessages <- m.Message
		}
	})
	dg.AddHandler(func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		var err error
		switch ic.Type {
		case discordgo.InteractionApplicationCommand:
			switch ic.ApplicationCommandData().Name {
			case "work":
				err = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource})
				if err == nil {
					_, err = s.InteractionResponseEdit(ic.Interaction, &discordgo.WebhookEdit{
						Content: ptr("done"),
						Components: &[]discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
							discordgo.Button{Label: "Again", CustomID: "again"},
						}}},
					})
				}
				if err == nil {
					var m *discordgo.Message
					m, err = s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "more"})
					if err == nil && m.Content != "more" {
						err = fmt.Errorf("follow-up returned %+v", m)
					}
				}
				if err == nil {
					second := s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
						Type: discordgo.InteractionResponseChannelMessageWithSource, Data: &discordgo.InteractionResponseData{Content: "twice"},
					})
					var re *discordgo.RESTError
					if !errors.As(second, &re) || re.Message == nil || re.Message.Code != 40060 {
						err = fmt.Errorf("second acknowledgement: want 40060, got %v", second)
					}
				}
			case "secret":
				err = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
					Type: discordgo.InteractionResponseChannelMessageWithSource,
					Data: &discordgo.InteractionResponseData{Content: "psst", Flags: discordgo.MessageFlagsEphemeral},
				})
			}
		case discordgo.InteractionMessageComponent:
			if len(ic.Message.Components) != 1 {
				err = fmt.Errorf("component interaction without the message's components: %+v", ic.Message)
				break
			}
			err = s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
				Type: discordgo.InteractionResponseUpdateMessage,
				Data: &discordgo.InteractionResponseData{Content: "clicked " + ic.MessageComponentData().CustomID, Components: []discordgo.MessageComponent{}},
			})
		}
		errs <- err
	})
	open(t, dg)

	h := f.Interact(&discordgo.Interaction{Data: discordgo.ApplicationCommandInteractionData{Name: "work"}})
	if err := receive(t, errs); err != nil {
		t.Fatal(err)
	}
	rs, err := h.Wait(progresstest.Context(t), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[0].Kind != "callback" || rs[0].Type != discordgo.InteractionResponseDeferredChannelMessageWithSource ||
		rs[1].Kind != "edit" || rs[1].Message.Content != "done" || rs[2].Kind != "followup" || rs[2].Message.Content != "more" {
		t.Fatalf("unexpected responses %+v", rs)
	}
	orig := h.Original()
	if orig == nil || orig.Content != "done" || orig.Flags&discordgo.MessageFlagsLoading != 0 || len(orig.Components) != 1 || orig.Interaction == nil || orig.Interaction.Name != "work" {
		t.Fatalf("unexpected original %+v", orig)
	}
	msgs := f.Messages(ch)
	if len(msgs) != 2 || msgs[0].ID != orig.ID || msgs[1].Content != "more" {
		t.Fatalf("channel messages %+v", msgs)
	}

	click := f.Interact(&discordgo.Interaction{
		Data:    discordgo.MessageComponentInteractionData{CustomID: "again", ComponentType: discordgo.ButtonComponent},
		Message: &discordgo.Message{ID: orig.ID},
	})
	if err := receive(t, errs); err != nil {
		t.Fatal(err)
	}
	rs, err = click.Wait(progresstest.Context(t), 1)
	if err != nil || rs[0].Type != discordgo.InteractionResponseUpdateMessage {
		t.Fatalf("click responses %+v %v", rs, err)
	}
	msgs = f.Messages(ch)
	if msgs[0].Content != "clicked again" || len(msgs[0].Components) != 0 || msgs[0].EditedTimestamp == nil {
		t.Fatalf("the update must edit the clicked message: %+v", msgs[0])
	}

	secret := f.Interact(&discordgo.Interaction{Data: discordgo.ApplicationCommandInteractionData{Name: "secret"}})
	if err := receive(t, errs); err != nil {
		t.Fatal(err)
	}
	if _, err := secret.Wait(progresstest.Context(t), 1); err != nil {
		t.Fatal(err)
	}
	if o := secret.Original(); o == nil || o.Flags&discordgo.MessageFlagsEphemeral == 0 || o.Content != "psst" {
		t.Fatalf("ephemeral original %+v", o)
	}
	if n := len(f.Messages(ch)); n != 2 {
		t.Fatalf("an ephemeral response must not appear in the channel: %d messages", n)
	}

	// With the MESSAGE_CONTENT intent, a user's message arrives whole.
	f.SendMessage(&discordgo.Message{Content: "plain text"})
	if m := receive(t, userMessages); m.Content != "plain text" {
		t.Fatalf("content withheld despite the intent: %+v", m)
	}
}

// TestLateAcknowledgement answers through discordgo's handler after the
// fake's clock has moved past the deadline: the callback is refused and
// recorded as late, and the interaction has no webhook for a follow-up.
func TestLateAcknowledgement(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(stoppedAt)
	f := newFake(t, discordtest.Options{Clock: clock})
	dg := restSession(t, f)
	release := make(chan struct{})
	results := make(chan error, 2)
	dg.AddHandler(func(s *discordgo.Session, ic *discordgo.InteractionCreate) {
		<-release
		results <- s.InteractionRespond(ic.Interaction, &discordgo.InteractionResponse{
			Type: discordgo.InteractionResponseChannelMessageWithSource, Data: &discordgo.InteractionResponseData{Content: "too late"},
		})
		_, err := s.FollowupMessageCreate(ic.Interaction, true, &discordgo.WebhookParams{Content: "follow"})
		results <- err
	})
	open(t, dg)
	h := f.Interact(&discordgo.Interaction{Data: discordgo.ApplicationCommandInteractionData{Name: "slow"}})
	if want := stoppedAt.Add(discordtest.DefaultInteractionDeadline); !h.Deadline().Equal(want) {
		t.Fatalf("deadline %v, want %v (dispatch on the fake's clock plus 3 s)", h.Deadline(), want)
	}
	late := h.Deadline().Add(time.Millisecond)
	clock.Set(late)
	close(release)
	restError(t, receive(t, results), http.StatusNotFound, 10062)
	restError(t, receive(t, results), http.StatusNotFound, 10015)
	rs := h.Responses()
	if len(rs) != 1 || !rs[0].Late || rs[0].Data == nil || rs[0].Data.Content != "too late" || !rs[0].At.Equal(late) ||
		h.Acknowledged() || h.Original() != nil {
		t.Fatalf("late callback: %+v acked=%v", rs, h.Acknowledged())
	}
}

// TestInteractionDeadlineOnInjectedClock shows that the deadline is
// measured on Options.Clock, both when the interaction is dispatched
// and when its callback arrives: the clock stands at a date far from the
// real one, so a deadline measured on the real clock at either end would
// accept the late callback or refuse the early one.
func TestInteractionDeadlineOnInjectedClock(t *testing.T) {
	t.Parallel()
	const deadline = 10 * time.Second
	clock := clocktest.New(stoppedAt)
	f := newFake(t, discordtest.Options{Clock: clock, InteractionDeadline: deadline})
	dg := restSession(t, f)
	ix := func() (*discordtest.Interaction, *discordgo.Interaction) {
		h := f.Interact(&discordgo.Interaction{Data: discordgo.ApplicationCommandInteractionData{Name: "timed"}})
		return h, &discordgo.Interaction{ID: h.ID(), Token: h.Token(), AppID: f.Config().ApplicationID}
	}
	respond := func(i *discordgo.Interaction) error {
		return dg.InteractionRespond(i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource,
			Data: &discordgo.InteractionResponseData{Content: "answer"}})
	}
	early, iEarly := ix()
	onTime, iOnTime := ix()
	late, iLate := ix()
	end := stoppedAt.Add(deadline)
	for _, h := range []*discordtest.Interaction{early, onTime, late} {
		if !h.Deadline().Equal(end) {
			t.Fatalf("deadline %v, want %v", h.Deadline(), end)
		}
	}
	check := func(name string, h *discordtest.Interaction, at time.Time, wantLate bool) {
		t.Helper()
		rs := h.Responses()
		if len(rs) != 1 || rs[0].Kind != "callback" || rs[0].Late != wantLate || !rs[0].At.Equal(at) || h.Acknowledged() == wantLate {
			t.Errorf("%s: responses %+v, acknowledged %v; want late=%v at %v", name, rs, h.Acknowledged(), wantLate, at)
		}
	}

	clock.Set(end.Add(-time.Nanosecond))
	if err := respond(iEarly); err != nil {
		t.Fatalf("a callback just before the deadline: %v", err)
	}
	check("just before", early, end.Add(-time.Nanosecond), false)
	clock.Set(end)
	if err := respond(iOnTime); err != nil {
		t.Fatalf("a callback at the deadline: %v", err)
	}
	check("at the deadline", onTime, end, false)
	clock.Set(end.Add(time.Nanosecond))
	restError(t, respond(iLate), http.StatusNotFound, 10062)
	check("just after", late, end.Add(time.Nanosecond), true)

	// An interaction dispatched now has its deadline from now.
	fresh, iFresh := ix()
	if want := end.Add(time.Nanosecond + deadline); !fresh.Deadline().Equal(want) {
		t.Fatalf("deadline of an interaction dispatched later: %v, want %v", fresh.Deadline(), want)
	}
	if err := respond(iFresh); err != nil {
		t.Fatalf("a callback in time for a later interaction: %v", err)
	}
	check("later interaction", fresh, end.Add(time.Nanosecond), false)
}

// TestInteractionCallbackRules exercises callback semantics over REST only:
// the interaction handle's id and token are all the callback routes need.
func TestInteractionCallbackRules(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{})
	dg := restSession(t, f)
	ix := func(i *discordgo.Interaction) (*discordtest.Interaction, *discordgo.Interaction) {
		h := f.Interact(i)
		return h, &discordgo.Interaction{ID: h.ID(), Token: h.Token(), AppID: f.Config().ApplicationID}
	}
	msg := func(content string) *discordgo.InteractionResponse {
		return &discordgo.InteractionResponse{Type: discordgo.InteractionResponseChannelMessageWithSource, Data: &discordgo.InteractionResponseData{Content: content}}
	}

	// Unknown interaction, webhook before acknowledgement, empty and long content.
	err := dg.InteractionRespond(&discordgo.Interaction{ID: "1", Token: "nope"}, msg("x"))
	restError(t, err, http.StatusNotFound, 10062)
	h, i := ix(&discordgo.Interaction{Data: discordgo.ApplicationCommandInteractionData{Name: "a"}})
	_, err = dg.InteractionResponse(i)
	restError(t, err, http.StatusNotFound, 10015)
	_, err = dg.FollowupMessageCreate(i, true, &discordgo.WebhookParams{Content: "x"})
	restError(t, err, http.StatusNotFound, 10015)
	restError(t, dg.InteractionRespond(i, msg("")), http.StatusBadRequest, 50006)
	wantFormError(t, dg.InteractionRespond(i, msg(strings.Repeat("x", 2001))), "data.content", "BASE_TYPE_MAX_LENGTH")
	wantFormError(t, dg.InteractionRespond(i, &discordgo.InteractionResponse{Type: discordgo.InteractionApplicationCommandAutocompleteResult,
		Data: &discordgo.InteractionResponseData{Choices: []*discordgo.ApplicationCommandOptionChoice{}}}), "type", "INTERACTION_RESPONSE_TYPE_INVALID")
	if h.Acknowledged() {
		t.Fatal("refused callbacks must not acknowledge")
	}

	// A type 4 answer with a file, then GET @original.
	err = dg.InteractionRespond(i, &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: "see file", Files: []*discordgo.File{{Name: "log.txt", Reader: strings.NewReader("hello log")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	orig, err := dg.InteractionResponse(i)
	if err != nil || orig.Content != "see file" || len(orig.Attachments) != 1 || orig.Attachments[0].Filename != "log.txt" {
		t.Fatalf("@original: %v %+v", err, orig)
	}
	if b, ok := f.Attachment(orig.Attachments[0].ID); !ok || string(b) != "hello log" {
		t.Fatalf("attachment bytes %q %v", b, ok)
	}

	// Deferred: @original is a loading placeholder that the first follow-up fills.
	h, i = ix(&discordgo.Interaction{Data: discordgo.ApplicationCommandInteractionData{Name: "b"}})
	err = dg.InteractionRespond(i, &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}})
	if err != nil {
		t.Fatal(err)
	}
	placeholder := h.Original()
	if placeholder == nil || placeholder.Flags&discordgo.MessageFlagsLoading == 0 {
		t.Fatalf("placeholder %+v", placeholder)
	}
	first, err := dg.FollowupMessageCreate(i, true, &discordgo.WebhookParams{Content: "result"})
	if err != nil || first.ID != placeholder.ID || first.Flags&discordgo.MessageFlagsLoading != 0 || first.Flags&discordgo.MessageFlagsEphemeral == 0 {
		t.Fatalf("first follow-up after defer: %v %+v", err, first)
	}
	second, err := dg.FollowupMessageCreate(i, true, &discordgo.WebhookParams{Content: "another"})
	if err != nil || second.ID == placeholder.ID {
		t.Fatalf("second follow-up: %v %+v", err, second)
	}
	edited, err := dg.FollowupMessageEdit(i, second.ID, &discordgo.WebhookEdit{Content: ptr("changed")})
	if err != nil || edited.Content != "changed" || edited.EditedTimestamp == nil {
		t.Fatalf("follow-up edit: %v %+v", err, edited)
	}
	if err := dg.FollowupMessageDelete(i, second.ID); err != nil {
		t.Fatal(err)
	}
	kinds := []string{}
	for _, r := range h.Responses() {
		kinds = append(kinds, r.Kind)
	}
	if strings.Join(kinds, ",") != "callback,followup,followup,followup_edit,followup_delete" {
		t.Fatalf("kinds %v", kinds)
	}
	if n := len(f.Messages(discordtest.DefaultChannelID)); n != 1 {
		t.Fatalf("the channel must hold only the first, non-ephemeral answer; has %d messages", n)
	}

	// Autocomplete: choices, at most 25.
	_, i = ix(&discordgo.Interaction{Type: discordgo.InteractionApplicationCommandAutocomplete, Data: discordgo.ApplicationCommandInteractionData{Name: "c"}})
	choices := make([]*discordgo.ApplicationCommandOptionChoice, 26)
	for n := range choices {
		choices[n] = &discordgo.ApplicationCommandOptionChoice{Name: fmt.Sprint(n), Value: fmt.Sprint(n)}
	}
	auto := &discordgo.InteractionResponse{Type: discordgo.InteractionApplicationCommandAutocompleteResult, Data: &discordgo.InteractionResponseData{Choices: choices}}
	wantFormError(t, dg.InteractionRespond(i, auto), "data.choices", "BASE_TYPE_MAX_LENGTH")
	auto.Data.Choices = choices[:25]
	if err := dg.InteractionRespond(i, auto); err != nil {
		t.Fatal(err)
	}

	// Modals: allowed for a command, not for a modal submission.
	modal := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: &discordgo.InteractionResponseData{
		CustomID: "m", Title: "Edit task",
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.TextInput{CustomID: "title", Label: "Title", Style: discordgo.TextInputShort},
		}}},
	}}
	h, i = ix(&discordgo.Interaction{Data: discordgo.ApplicationCommandInteractionData{Name: "d"}})
	// A text input's text, placeholder and lengths have Discord's limits.
	tooMuch := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseModal, Data: &discordgo.InteractionResponseData{
		CustomID: "m", Title: "Edit task",
		Components: []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
			discordgo.TextInput{CustomID: "body", Label: "Body", Style: discordgo.TextInputParagraph, Value: strings.Repeat("x", 4001)},
		}}},
	}}
	wantFormError(t, dg.InteractionRespond(i, tooMuch), "data.components.0.components.0.value", "BASE_TYPE_MAX_LENGTH")
	tooMuch.Data.Components = []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
		discordgo.TextInput{CustomID: "body", Label: "Body", Style: discordgo.TextInputParagraph, Placeholder: strings.Repeat("p", 101)}}}}
	wantFormError(t, dg.InteractionRespond(i, tooMuch), "data.components.0.components.0.placeholder", "BASE_TYPE_MAX_LENGTH")
	tooMuch.Data.Components = []discordgo.MessageComponent{discordgo.ActionsRow{Components: []discordgo.MessageComponent{
		discordgo.TextInput{CustomID: "body", Label: "Body", Style: discordgo.TextInputParagraph, MaxLength: 4001}}}}
	wantFormError(t, dg.InteractionRespond(i, tooMuch), "data.components.0.components.0.max_length", "NUMBER_TYPE_MAX")
	if err := dg.InteractionRespond(i, modal); err != nil {
		t.Fatal(err)
	}
	if rs := h.Responses(); rs[0].Data.Title != "Edit task" || len(rs[0].Data.Components) != 1 {
		t.Fatalf("modal data %+v", rs[0].Data)
	}
	h, i = ix(&discordgo.Interaction{Data: discordgo.ModalSubmitInteractionData{CustomID: "m", Components: []discordgo.MessageComponent{
		discordgo.ActionsRow{Components: []discordgo.MessageComponent{discordgo.TextInput{CustomID: "title", Value: "New title"}}},
	}}})
	if p := h.Payload(); p.Type != discordgo.InteractionModalSubmit || len(p.ModalSubmitData().Components) != 1 {
		t.Fatalf("modal submit payload %+v", p)
	}
	wantFormError(t, dg.InteractionRespond(i, modal), "type", "INTERACTION_RESPONSE_TYPE_INVALID")
}

func TestMessageNonceIdempotent(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{})
	dg := restSession(t, f)
	ch := discordtest.DefaultChannelID
	// discordgo's MessageSend has no nonce; a bot sends its own body.
	type send struct {
		Content      string `json:"content"`
		Nonce        string `json:"nonce,omitempty"`
		EnforceNonce bool   `json:"enforce_nonce,omitempty"`
	}
	ep := discordgo.EndpointChannelMessages(ch)
	post := func(body send) (*discordgo.Message, error) {
		b, err := dg.RequestWithBucketID("POST", ep, body, ep)
		if err != nil {
			return nil, err
		}
		var m discordgo.Message
		return &m, json.Unmarshal(b, &m)
	}
	a, err := post(send{"hello", "task-1-note", true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := post(send{"hello", "task-1-note", true})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != b.ID || len(f.Messages(ch)) != 1 {
		t.Fatalf("enforce_nonce must return the same message: %s %s, %d messages", a.ID, b.ID, len(f.Messages(ch)))
	}
	if _, err := post(send{"again", "other", false}); err != nil {
		t.Fatal(err)
	}
	if _, err := post(send{"again", "other", false}); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Messages(ch)); n != 3 {
		t.Fatalf("without enforce_nonce both sends create messages: %d", n)
	}
	_, err = post(send{"x", strings.Repeat("n", 26), true})
	wantFormError(t, err, "nonce", "BASE_TYPE_MAX_LENGTH")
}

func TestThreads(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{})
	dg := restSession(t, f)
	ch := discordtest.DefaultChannelID
	m, err := dg.ChannelMessageSend(ch, "task 1")
	if err != nil {
		t.Fatal(err)
	}
	th, err := dg.MessageThreadStart(ch, m.ID, "task-1", 1440)
	if err != nil {
		t.Fatal(err)
	}
	if th.ID != m.ID || th.ParentID != ch || th.Type != discordgo.ChannelTypeGuildPublicThread || th.Name != "task-1" || th.GuildID != f.Config().GuildID {
		t.Fatalf("thread %+v", th)
	}
	_, err = dg.MessageThreadStart(ch, m.ID, "again", 60)
	restError(t, err, http.StatusBadRequest, 160004)
	_, err = dg.MessageThreadStart(ch, "123", "x", 60)
	restError(t, err, http.StatusNotFound, 10008)
	m2, _ := dg.ChannelMessageSend(ch, "task 2")
	_, err = dg.MessageThreadStart(ch, m2.ID, strings.Repeat("n", 101), 60)
	wantFormError(t, err, "name", "BASE_TYPE_BAD_LENGTH")

	if _, err := dg.ChannelMessageSend(th.ID, "in the thread"); err != nil {
		t.Fatal(err)
	}
	if msgs := f.Messages(th.ID); len(msgs) != 1 || msgs[0].ChannelID != th.ID {
		t.Fatalf("thread messages %+v", msgs)
	}
	if starter, ok := f.Message(m.ID); !ok || starter.Flags&discordgo.MessageFlagsHasThread == 0 || starter.Thread == nil {
		t.Fatalf("starter message %+v", starter)
	}
	got, err := dg.Channel(th.ID)
	if err != nil || got.ID != th.ID || !got.IsThread() {
		t.Fatalf("GET thread: %v %+v", err, got)
	}
	archived, err := dg.ChannelEdit(th.ID, &discordgo.ChannelEdit{Archived: ptr(true), Locked: ptr(true)})
	if err != nil || !archived.ThreadMetadata.Archived || !archived.ThreadMetadata.Locked {
		t.Fatalf("archive: %v %+v", err, archived)
	}
	if _, err := dg.ChannelMessageSend(th.ID, "wake up"); err != nil {
		t.Fatal(err)
	}
	if cur, _ := f.Thread(th.ID); cur.ThreadMetadata.Archived || cur.MessageCount != 2 {
		t.Fatalf("a message must unarchive the thread: %+v", cur.ThreadMetadata)
	}

	side, err := dg.ThreadStart(ch, "side", discordgo.ChannelTypeGuildPublicThread, 60)
	if err != nil || side.ParentID != ch || side.ID == m.ID {
		t.Fatalf("thread without message: %v %+v", err, side)
	}
	msgs := f.Messages(ch)
	if last := msgs[len(msgs)-1]; last.Type != discordgo.MessageTypeThreadCreated || last.MessageReference.ChannelID != side.ID {
		t.Fatalf("a public thread without message is announced in the parent: %+v", last)
	}
	if ths := f.Threads(); len(ths) != 2 || ths[0].ID != th.ID || ths[1].ID != side.ID {
		t.Fatalf("threads %+v", ths)
	}
	_, err = dg.MessageThreadStart(th.ID, m.ID, "nested", 60)
	restError(t, err, http.StatusNotFound, 10008)
}

func TestMessagesREST(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{Channels: []string{"300000000000000001", "300000000000000002"}})
	dg := restSession(t, f)
	ch := "300000000000000002"

	_, err := dg.ChannelMessageSend("999", "x")
	restError(t, err, http.StatusNotFound, 10003)
	_, err = dg.ChannelMessageSend(ch, "")
	restError(t, err, http.StatusBadRequest, 50006)
	_, err = dg.ChannelMessageSend(ch, strings.Repeat("é", 2001))
	wantFormError(t, err, "content", "BASE_TYPE_MAX_LENGTH")
	if _, err := dg.ChannelMessageSend(ch, strings.Repeat("é", 2000)); err != nil {
		t.Fatalf("2000 characters are allowed: %v", err)
	}
	row := func(buttons ...discordgo.MessageComponent) discordgo.MessageComponent {
		return discordgo.ActionsRow{Components: buttons}
	}
	button := func(id string) discordgo.MessageComponent { return discordgo.Button{Label: "b", CustomID: id} }
	_, err = dg.ChannelMessageSendComplex(ch, &discordgo.MessageSend{Content: "x", Components: []discordgo.MessageComponent{row(button(strings.Repeat("i", 101)))}})
	wantFormError(t, err, "components.0.components.0.custom_id", "BASE_TYPE_MAX_LENGTH")
	_, err = dg.ChannelMessageSendComplex(ch, &discordgo.MessageSend{Content: "x", Components: []discordgo.MessageComponent{
		row(button("a"), button("b"), button("c"), button("d"), button("e"), button("f")),
	}})
	wantFormError(t, err, "components.0.components", "BASE_TYPE_BAD_LENGTH")
	_, err = dg.ChannelMessageSendComplex(ch, &discordgo.MessageSend{Content: "x", Components: []discordgo.MessageComponent{row(button("a")), row(button("a"))}})
	wantFormError(t, err, "components.1.components.0.custom_id", "COMPONENT_CUSTOM_ID_DUPLICATED")
	_, err = dg.ChannelMessageSendComplex(ch, &discordgo.MessageSend{Content: "x", Components: []discordgo.MessageComponent{
		row(discordgo.Button{Label: strings.Repeat("l", 81), CustomID: "x"}),
	}})
	wantFormError(t, err, "components.0.components.0.label", "BASE_TYPE_MAX_LENGTH")

	sent, err := dg.ChannelMessageSendComplex(ch, &discordgo.MessageSend{
		Content:    "with buttons",
		Components: []discordgo.MessageComponent{row(button("approve"), button("reject"))},
		Files:      []*discordgo.File{{Name: "diff.patch", ContentType: "text/x-diff", Reader: strings.NewReader("+line\n")}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Components) != 1 || len(sent.Attachments) != 1 || sent.Attachments[0].Size != 6 || sent.Author.ID != f.Config().BotUserID {
		t.Fatalf("sent %+v", sent)
	}
	if b, _ := f.Attachment(sent.Attachments[0].ID); string(b) != "+line\n" {
		t.Fatalf("attachment %q", b)
	}
	edited, err := dg.ChannelMessageEdit(ch, sent.ID, "edited")
	if err != nil || edited.Content != "edited" || edited.EditedTimestamp == nil || len(edited.Components) != 1 {
		t.Fatalf("edit: %v %+v", err, edited)
	}
	user := f.SendMessage(&discordgo.Message{ChannelID: ch, Content: "from a user"})
	_, err = dg.ChannelMessageEdit(ch, user.ID, "hijack")
	restError(t, err, http.StatusForbidden, 50005)

	list, err := dg.ChannelMessages(ch, 2, "", "", "")
	if err != nil || len(list) != 2 || list[0].ID != user.ID || list[1].ID != sent.ID {
		t.Fatalf("recent first: %v %+v", err, list)
	}
	older, err := dg.ChannelMessages(ch, 10, sent.ID, "", "")
	if err != nil || len(older) != 1 {
		t.Fatalf("before: %v %d", err, len(older))
	}
	_, err = dg.ChannelMessages(ch, 101, "", "", "")
	wantFormError(t, err, "limit", "NUMBER_TYPE_MAX")

	if err := dg.ChannelMessageDelete(ch, sent.ID); err != nil {
		t.Fatal(err)
	}
	_, err = dg.ChannelMessage(ch, sent.ID)
	restError(t, err, http.StatusNotFound, 10008)
	if n := len(f.Messages(ch)); n != 2 {
		t.Fatalf("after delete: %d messages", n)
	}

	// Authentication and unknown routes.
	bad, _ := discordgo.New("Bot wrong")
	bad.Client = f.Client()
	_, err = bad.ChannelMessageSend(ch, "x")
	restError(t, err, http.StatusUnauthorized, 0)
	_, err = dg.Request("GET", discordgo.EndpointAPI+"nothing/here", nil)
	restError(t, err, http.StatusNotFound, 0)
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{})
	dg := restSession(t, f)
	ch := discordtest.DefaultChannelID
	isPost := func(method, path string) bool { return method == "POST" && strings.HasSuffix(path, "/messages") }

	f.RateLimit(2, 20*time.Millisecond, false, isPost)
	start := time.Now()
	if _, err := dg.ChannelMessageSend(ch, "eventually"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 40*time.Millisecond {
		t.Fatalf("discordgo must wait retry_after twice, took %v", d)
	}
	var statuses []int
	for _, r := range f.Requests() {
		if isPost(r.Method, r.Path) {
			statuses = append(statuses, r.Status)
		}
	}
	if fmt.Sprint(statuses) != "[429 429 200]" {
		t.Fatalf("statuses %v", statuses)
	}

	// The headers, seen by a plain client.
	f.RateLimit(1, 1500*time.Millisecond, true, nil)
	req, _ := http.NewRequest("GET", discordgo.EndpointChannel(ch), nil)
	req.Header.Set("Authorization", "Bot "+testToken)
	resp, err := f.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	h := resp.Header
	if resp.StatusCode != 429 || h.Get("Retry-After") != "2" || h.Get("X-RateLimit-Global") != "true" || h.Get("X-RateLimit-Scope") != "global" ||
		h.Get("X-RateLimit-Remaining") != "0" || h.Get("X-RateLimit-Reset-After") != "1.500" || h.Get("X-RateLimit-Bucket") == "" {
		t.Fatalf("429 %d headers %v", resp.StatusCode, h)
	}
	var rl struct {
		Message    string  `json:"message"`
		RetryAfter float64 `json:"retry_after"`
		Global     bool    `json:"global"`
	}
	if err := json.Unmarshal(body, &rl); err != nil || rl.Message != "You are being rate limited." || rl.RetryAfter != 1.5 || !rl.Global {
		t.Fatalf("429 body %s", body)
	}
	resp, err = f.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Limit") != "5" || resp.Header.Get("X-RateLimit-Remaining") == "0" ||
		resp.Header.Get("X-RateLimit-Bucket") == "" || resp.Header.Get("X-RateLimit-Global") != "" {
		t.Fatalf("ordinary response %d headers %v", resp.StatusCode, resp.Header)
	}

	// A global limit also passes through discordgo.
	f.RateLimit(1, 10*time.Millisecond, true, nil)
	if _, err := dg.ChannelMessageSend(ch, "after a global limit"); err != nil {
		t.Fatal(err)
	}
}

// TestResume drops the connection in several ways; discordgo reconnects
// and RESUMEs, and an interaction dispatched meanwhile arrives exactly once.
func TestResume(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cut  func(f *discordtest.Server)
	}{
		{"tcp close", func(f *discordtest.Server) { f.DropConnection(0) }},
		{"close 4000", func(f *discordtest.Server) { f.DropConnection(4000) }},
		{"op 7 reconnect", func(f *discordtest.Server) { f.SendReconnect() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, discordtest.Options{})
			dg := restSession(t, f)
			dg.SyncEvents = true // handlers run in arrival order
			got := make(chan string, 10)
			dg.AddHandler(func(_ *discordgo.Session, ic *discordgo.InteractionCreate) { got <- ic.ID })
			open(t, dg)
			// Cut only after discordgo's first heartbeat: a heartbeat goroutine
			// that has not sent it yet writes to the dead connection later and
			// then closes the new one with 1000, ending the session.
			if err := f.WaitFor(progresstest.Context(t), func() bool { return f.Heartbeats() >= 1 }); err != nil {
				t.Fatal(err)
			}
			tc.cut(f)
			h := f.Interact(&discordgo.Interaction{Data: discordgo.ApplicationCommandInteractionData{Name: "queued"}})
			if err := f.WaitFor(progresstest.Context(t), func() bool { return f.Resumes() == 1 && f.Connected() }); err != nil {
				t.Fatal(err)
			}
			if id := receive(t, got); id != h.ID() {
				t.Fatalf("got interaction %s, want %s", id, h.ID())
			}
			marker := f.Interact(&discordgo.Interaction{Data: discordgo.ApplicationCommandInteractionData{Name: "marker"}})
			if id := receive(t, got); id != marker.ID() {
				t.Fatalf("got interaction %s before the marker %s: delivered twice?", id, marker.ID())
			}
			if f.Sessions() != 1 {
				t.Fatalf("sessions %d, want 1 (resumed)", f.Sessions())
			}
			n := 0
			for _, d := range f.Dispatches() {
				if d.Type == "INTERACTION_CREATE" && strings.Contains(string(d.Data), h.ID()) {
					n++
				}
			}
			if tc.name != "op 7 reconnect" && n != 1 {
				t.Fatalf("the queued interaction was written %d times", n)
			}
		})
	}
}

// TestZombieConnection stops acknowledging heartbeats. discordgo closes
// with 1000, which invalidates the session, so its RESUME gets
// INVALID_SESSION and it identifies again.
func TestZombieConnection(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{HeartbeatInterval: 30 * time.Millisecond})
	dg := restSession(t, f)
	open(t, dg)
	f.SkipAcks(1 << 30)
	if err := f.WaitFor(progresstest.Context(t), func() bool { return f.Sessions() >= 2 && f.Connected() }); err != nil {
		t.Fatal(err)
	}
	if f.Resumes() != 0 {
		t.Fatalf("resumes %d, want 0", f.Resumes())
	}
	var readies []string
	for _, d := range f.Dispatches() {
		if d.Type == "READY" {
			readies = append(readies, d.SessionID)
		}
	}
	if len(readies) < 2 || readies[0] == readies[1] {
		t.Fatalf("READY sessions %v", readies)
	}
}

// TestMessageContentIntent checks that, without MESSAGE_CONTENT, a user's
// message arrives blanked unless it mentions the bot; and that a message
// sent before the client identified is delivered after READY.
func TestMessageContentIntent(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{})
	early := f.SendMessage(&discordgo.Message{Content: "sent before identify"})
	dg := restSession(t, f)
	dg.Identify.Intents = discordgo.IntentsGuilds | discordgo.IntentsGuildMessages
	got := make(chan *discordgo.Message, 10)
	dg.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) { got <- m.Message })
	open(t, dg)

	m := receive(t, got)
	if m.ID != early.ID || m.Content != "" || m.Author.ID != discordtest.DefaultUserID {
		t.Fatalf("queued message %+v", m)
	}
	mention := f.SendMessage(&discordgo.Message{Content: "<@" + f.Config().BotUserID + "> please look"})
	m = receive(t, got)
	if m.ID != mention.ID || m.Content == "" || len(m.Mentions) != 1 {
		t.Fatalf("a mention must keep the content: %+v", m)
	}
	own, err := dg.ChannelMessageSend(discordtest.DefaultChannelID, "my own")
	if err != nil {
		t.Fatal(err)
	}
	m = receive(t, got)
	if m.ID != own.ID || m.Content != "my own" {
		t.Fatalf("the bot's own message must keep the content: %+v", m)
	}
	if stored := f.Messages(discordtest.DefaultChannelID); stored[0].Content != "sent before identify" {
		t.Fatalf("the stored message keeps its content: %+v", stored[0])
	}
}

func TestGatewayProtocolErrors(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{DenyPrivilegedIntents: true})
	dial := func(t *testing.T) *websocket.Conn {
		c, _, err := websocket.DefaultDialer.Dial(f.GatewayURL()+"?v=10&encoding=json", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		var hello struct {
			Op int `json:"op"`
			D  struct {
				HeartbeatInterval int `json:"heartbeat_interval"`
			} `json:"d"`
		}
		if err := c.ReadJSON(&hello); err != nil || hello.Op != 10 || hello.D.HeartbeatInterval != 41250 {
			t.Fatalf("HELLO %+v %v", hello, err)
		}
		return c
	}
	closeCode := func(t *testing.T, c *websocket.Conn) int {
		for {
			if _, _, err := c.ReadMessage(); err != nil {
				var ce *websocket.CloseError
				if errors.As(err, &ce) {
					return ce.Code
				}
				t.Fatalf("want a close frame, got %v", err)
			}
		}
	}
	identify := func(token string, intents discordgo.Intent) map[string]any {
		return map[string]any{"op": 2, "d": map[string]any{"token": token, "intents": intents, "properties": map[string]string{}}}
	}
	cases := []struct {
		name string
		send []any
		code int
	}{
		{"not json", []any{"{"}, 4002},
		{"op before identify", []any{map[string]any{"op": 3, "d": map[string]any{}}}, 4003},
		{"bad token", []any{identify("nope", 0)}, 4004},
		{"privileged intent", []any{identify(testToken, discordgo.IntentMessageContent)}, 4014},
		{"second identify", []any{identify(testToken, 1), identify(testToken, 1)}, 4005},
		{"unknown opcode", []any{identify(testToken, 1), map[string]any{"op": 42}}, 4001},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t)
			for _, m := range tc.send {
				var err error
				if s, ok := m.(string); ok {
					err = c.WriteMessage(websocket.TextMessage, []byte(s))
				} else {
					err = c.WriteJSON(m)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if code := closeCode(t, c); code != tc.code {
				t.Fatalf("close code %d, want %d", code, tc.code)
			}
		})
	}
	t.Run("resume unknown session", func(t *testing.T) {
		c := dial(t)
		if err := c.WriteJSON(map[string]any{"op": 6, "d": map[string]any{"token": "Bot " + testToken, "session_id": "x", "seq": 1}}); err != nil {
			t.Fatal(err)
		}
		var inv struct {
			Op int  `json:"op"`
			D  bool `json:"d"`
		}
		if err := c.ReadJSON(&inv); err != nil || inv.Op != 9 || inv.D {
			t.Fatalf("want op 9 d=false, got %+v %v", inv, err)
		}
	})
}

// TestCompressedFrames checks that discordgo reads per-message zlib frames.
func TestCompressedFrames(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{Compress: true})
	dg := restSession(t, f)
	got := make(chan string, 1)
	dg.AddHandler(func(_ *discordgo.Session, ic *discordgo.InteractionCreate) { got <- ic.ApplicationCommandData().Name })
	open(t, dg)
	f.Interact(&discordgo.Interaction{Data: discordgo.ApplicationCommandInteractionData{Name: "zipped"}})
	if name := receive(t, got); name != "zipped" {
		t.Fatalf("got %q", name)
	}
	if dg.State.User == nil || dg.State.User.ID != f.Config().BotUserID {
		t.Fatal("READY was not decoded")
	}
}

func TestOptionsDefaultsAndPanics(t *testing.T) {
	t.Parallel()
	for _, o := range []discordtest.Options{
		{GuildID: "guild"},
		{Channels: []string{"1", "1"}},
		{HeartbeatInterval: time.Microsecond},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) did not panic", o)
				}
			}()
			discordtest.New(o).Close()
		}()
	}
	f := newFake(t, discordtest.Options{})
	cfg := f.Config()
	got := []string{cfg.ApplicationID, cfg.BotUserID, cfg.GuildID, cfg.Channels[0]}
	want := []string{discordtest.DefaultApplicationID, discordtest.DefaultBotUserID, discordtest.DefaultGuildID, discordtest.DefaultChannelID}
	sort.Strings(got)
	sort.Strings(want)
	if fmt.Sprint(got) != fmt.Sprint(want) || !strings.HasPrefix(f.URL(), "http://127.0.0.1:") {
		t.Fatalf("config %+v url %s", cfg, f.URL())
	}

	// Without Options.Clock, the deadline is measured on the real clock.
	wall := discordtest.New(discordtest.Options{})
	t.Cleanup(wall.Close)
	before := time.Now()
	h := wall.Interact(&discordgo.Interaction{Data: discordgo.ApplicationCommandInteractionData{Name: "x"}})
	after := time.Now()
	if d := h.Deadline(); d.Before(before.Add(discordtest.DefaultInteractionDeadline)) || d.After(after.Add(discordtest.DefaultInteractionDeadline)) {
		t.Errorf("deadline %v, want 3 s after a dispatch between %v and %v", d, before, after)
	}
}

func TestOtherRoutes(t *testing.T) {
	t.Parallel()
	f := newFake(t, discordtest.Options{})
	cfg := f.Config()
	dg := restSession(t, f)
	ch := discordtest.DefaultChannelID

	c, err := dg.ApplicationCommandCreate(cfg.ApplicationID, cfg.GuildID, &discordgo.ApplicationCommand{Name: "ping", Description: "Ping"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := dg.ApplicationCommandCreate(cfg.ApplicationID, cfg.GuildID, &discordgo.ApplicationCommand{Name: "ping", Description: "Ping again"})
	if err != nil || again.ID != c.ID || len(f.Commands()) != 1 || f.Commands()[0].Description != "Ping again" {
		t.Fatalf("create by name replaces: %v %+v", err, again)
	}
	edited, err := dg.ApplicationCommandEdit(cfg.ApplicationID, cfg.GuildID, c.ID, &discordgo.ApplicationCommand{Name: "pong", Description: "Pong"})
	if err != nil || edited.ID != c.ID || edited.Name != "pong" {
		t.Fatalf("edit: %v %+v", err, edited)
	}
	got, err := dg.ApplicationCommand(cfg.ApplicationID, cfg.GuildID, c.ID)
	if err != nil || got.Name != "pong" {
		t.Fatalf("get: %v %+v", err, got)
	}
	if err := dg.ApplicationCommandDelete(cfg.ApplicationID, cfg.GuildID, c.ID); err != nil {
		t.Fatal(err)
	}
	_, err = dg.ApplicationCommand(cfg.ApplicationID, cfg.GuildID, c.ID)
	restError(t, err, http.StatusNotFound, 10063)
	if _, err := dg.ApplicationCommandBulkOverwrite(cfg.ApplicationID, "", []*discordgo.ApplicationCommand{{Name: "global", Description: "g"}}); err != nil {
		t.Fatal(err)
	}
	if g := f.GlobalCommands(); len(g) != 1 || g[0].GuildID != "" || f.CommandWrites() != 0 {
		t.Fatalf("global commands %+v, guild writes %d", g, f.CommandWrites())
	}

	gb, err := dg.GatewayBot()
	if err != nil || strings.TrimSuffix(gb.URL, "/") != f.GatewayURL() || gb.Shards != 1 { // discordgo appends "/"
		t.Fatalf("gateway/bot: %v %+v", err, gb)
	}
	me, err := dg.User("@me")
	if err != nil || me.ID != cfg.BotUserID || !me.Bot {
		t.Fatalf("@me: %v %+v", err, me)
	}
	if err := dg.ChannelTyping(ch); err != nil {
		t.Fatal(err)
	}
	renamed, err := dg.ChannelEdit(ch, &discordgo.ChannelEdit{Name: "tasks", Topic: "agent work"})
	if err != nil || renamed.Name != "tasks" || renamed.Topic != "agent work" {
		t.Fatalf("channel edit: %v %+v", err, renamed)
	}

	var ids []string
	for i := 0; i < 5; i++ {
		m, err := dg.ChannelMessageSend(ch, fmt.Sprint("m", i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	after, err := dg.ChannelMessages(ch, 2, "", ids[1], "")
	if err != nil || len(after) != 2 || after[0].ID != ids[3] || after[1].ID != ids[2] {
		t.Fatalf("after: %v %+v", err, after)
	}
	around, err := dg.ChannelMessages(ch, 3, "", "", ids[2])
	if err != nil || len(around) != 3 || around[1].ID != ids[2] {
		t.Fatalf("around: %v %+v", err, around)
	}
}
