package discord

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/desk"
	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// runNotifier runs a desk notifier on st until the test ends or stop is
// called; each of its looks at the desk is sent on the returned channel.
func runNotifier(t *testing.T, st *store.Store, clock *clocktest.Fake) (passes chan time.Time, stop func()) {
	t.Helper()
	passes = make(chan time.Time, 100)
	n, err := desk.New(desk.Config{Clock: clock, PollInterval: 24 * time.Hour, OnPass: func(next time.Time) { passes <- next }}, st)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("notifier: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	return passes, stop
}

// TestDeskEscalationAndDigestOnceAcrossRestarts: a question that waits
// past its project's escalate_after is re-posted once to the escalation
// channel, mentioning the escalation role (and only it); a digest of what
// waits goes to the project's channel once its oldest item has waited
// digest_every, and at most once a period after; neither is sent again by
// a notifier that starts over on the same database (a restart), however
// often it looks.
func TestDeskEscalationAndDigestOnceAcrossRestarts(t *testing.T) {
	t.Parallel()
	const (
		escalations = "300000000000000009"
		role        = "500000000000000001"
	)
	clock := clocktest.New(time.Now().UTC().Truncate(time.Second))
	h := newHarnessWith(t, clock, func(_ *Config, o *discordtest.Options) { o.Channels = append(o.Channels, escalations) })
	ctx := context.Background()
	ch := projectChannel
	if _, err := h.st.CreateProject(ctx, models.Project{ID: "web", DiscordChannelID: &ch, Settings: models.ProjectSettings{
		EscalateAfter: models.Duration(time.Hour), EscalateChannel: escalations, EscalateRole: role,
		DigestEvery: models.Duration(2 * time.Hour), InputTimeout: models.Duration(24 * time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command", AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	id := h.task("web", "Pick a database")
	run, _, err := h.st.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	q, err := h.st.AskQuestion(ctx, run.ID, "Postgres or SQLite?")
	if err != nil {
		t.Fatal(err)
	}
	// The run ends (a restart of the daemon): the question still waits.
	if _, err := h.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventRecovery, Outcome: models.RunOutcomeRecovered}); err != nil {
		t.Fatal(err)
	}

	passes, stop := runNotifier(t, h.st, clock)
	if next := <-passes; !next.Equal(q.AskedAt.Add(time.Hour)) {
		t.Fatalf("the first look's next due time is %v, want the escalation at %v", next, q.AskedAt.Add(time.Hour))
	}
	clock.Advance(time.Hour)
	<-passes
	esc := h.waitMessageWith(escalations, "Waiting on you for 1h", "Postgres or SQLite?", "<@&"+role+">", id)
	if len(esc.Components) == 0 {
		t.Errorf("the escalated question has no Answer button: %+v", esc)
	}
	// Only the escalation role may be pinged.
	pinged := false
	for _, r := range h.fake.Requests() {
		if strings.Contains(r.Path, "/channels/"+escalations+"/messages") && strings.Contains(string(r.Body), `"roles":["`+role+`"]`) {
			pinged = true
		}
	}
	if !pinged {
		t.Error("the escalation's message does not allow its role's mention")
	}

	// A restart: a new notifier on a new handle of the same database.
	stop()
	st2 := storetest.OpenAt(t, h.db, storetest.WithClock(clock))
	passes, stop = runNotifier(t, st2, clock)
	<-passes
	clock.Advance(time.Hour) // the oldest item has waited 2h: the first digest
	<-passes
	h.waitMessageWith(projectChannel, "1 thing waits on you", "the oldest for 2h", "Postgres or SQLite?")
	clock.Advance(time.Hour) // 3h: within the digest's period
	stop()
	passes, stop = runNotifier(t, st2, clock) // another restart looks at once: nothing is due
	if next := <-passes; !next.Equal(q.AskedAt.Add(4 * time.Hour)) {
		t.Fatalf("after the restart the next digest is due at %v, want %v", next, q.AskedAt.Add(4*time.Hour))
	}
	clock.Advance(time.Hour) // 4h: the second digest
	<-passes
	h.waitMessageWith(projectChannel, "1 thing waits on you", "the oldest for 4h")
	stop()

	// The last notice queued is delivered, and no desk notice waits behind
	// it: exactly one escalation and two digests were sent. (The bot stops
	// first: it marks what it has posted.)
	h.stop()
	pending, err := h.st.PendingOutbox(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range pending {
		if m.Kind == models.NoticeDeskEscalation || m.Kind == models.NoticeDeskDigest {
			t.Errorf("a desk notice still waits to be delivered: %s %s", m.Kind, m.Key)
		}
	}
	count := func(channel, substr string) int {
		n := 0
		for _, m := range h.fake.Messages(channel) {
			if strings.Contains(m.Content, substr) {
				n++
			}
		}
		return n
	}
	if n := count(escalations, "Waiting on you"); n != 1 {
		t.Errorf("%d escalations, want 1", n)
	}
	if n := count(projectChannel, "waits on you"); n != 2 {
		t.Errorf("%d digests, want 2", n)
	}

}

// TestAProjectsRolesGuardItsAnswers: a project that names discord_roles
// takes answers (and approvals) from Discord only from members of them,
// or an admin: an authorized user without the role is refused, and the
// question stays open; with the role, the answer goes through. Answering
// twice is refused, naming who answered.
func TestAProjectsRolesGuardItsAnswers(t *testing.T) {
	t.Parallel()
	const answerers = "600000000000000001"
	h := newHarness(t)
	ctx := context.Background()
	ch := projectChannel
	if _, err := h.st.CreateProject(ctx, models.Project{ID: "web", DiscordChannelID: &ch, Settings: models.ProjectSettings{
		DiscordRoles: []string{answerers}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command", AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	id := h.task("web", "Pick a database")
	run, _, err := h.st.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	q, err := h.st.AskQuestion(ctx, run.ID, "Postgres or SQLite?")
	if err != nil {
		t.Fatal(err)
	}
	submit := func(roles []string, value string) string {
		t.Helper()
		i := h.fake.Interact(&discordgo.Interaction{Type: discordgo.InteractionModalSubmit, ChannelID: projectChannel,
			Member: &discordgo.Member{User: &discordgo.User{ID: alice}, Roles: roles},
			Data: discordgo.ModalSubmitInteractionData{CustomID: customID("answer", fmt.Sprint(q.ID)), Components: []discordgo.MessageComponent{
				&discordgo.ActionsRow{Components: []discordgo.MessageComponent{&discordgo.TextInput{CustomID: "text", Value: value}}}}}})
		_, text := h.answer(i, 1)
		return text
	}
	if got := submit([]string{"600000000000000002"}, "SQLite"); !strings.Contains(got, "Only members of <@&"+answerers+">") {
		t.Fatalf("an answer without the project's role: %q", got)
	}
	if open, _ := h.st.OpenQuestions(ctx); len(open) != 1 {
		t.Fatalf("the refused answer changed the question: %+v", open)
	}
	if got := submit([]string{answerers}, "SQLite"); !strings.Contains(got, "answered question") {
		t.Fatalf("an answer with the project's role: %q", got)
	}
	if got := submit([]string{answerers}, "Postgres"); !strings.Contains(got, "already answered") {
		t.Fatalf("a second answer: %q", got)
	}
	if d, err := h.st.GetQuestion(ctx, q.ID); err != nil || d.Answer == nil || *d.Answer != "SQLite" {
		t.Fatalf("the question after the answers: %+v %v", d, err)
	}
}
