package discord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/models"
)

// notices writes n progress-free notices (plan failures) for one task and
// returns their texts in order.
func (h *harness) notices(taskID string, n int) []string {
	h.t.Helper()
	var out []string
	for k := range n {
		msg := fmt.Sprintf("plan error number %03d", k)
		if err := h.st.Notify(context.Background(), fmt.Sprintf("test:%s:%d", taskID, k),
			models.NewPlanFailedNotice("web", models.PlanFailedNotice{TaskID: taskID, Error: msg})); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, msg)
	}
	return out
}

// countIn counts the messages of a channel that contain each text, in order.
func countIn(msgs []*discordgo.Message, texts []string) (counts []int, ordered bool) {
	ordered = true
	last := -1
	for _, txt := range texts {
		c := 0
		for i, m := range msgs {
			if strings.Contains(m.Content, txt) {
				c++
				if i < last {
					ordered = false
				}
				last = i
			}
		}
		counts = append(counts, c)
	}
	return counts, ordered
}

func TestRateLimitStormLosesNothing(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	id := h.task("web", "Noisy")
	// Every other message create is refused with a 429 for a while.
	h.fake.RateLimit(12, 30*time.Millisecond, false, func(method, path string) bool {
		return method == "POST" && strings.HasSuffix(path, "/messages")
	})
	texts := h.notices(id, 10)
	h.bot.Wake()
	if _, err := h.fake.WaitMessages(h.ctx(), projectChannel, 10); err != nil {
		t.Fatal(err)
	}
	counts, ordered := countIn(h.fake.Messages(projectChannel), texts)
	for i, c := range counts {
		if c != 1 {
			t.Errorf("notice %d posted %d times", i, c)
		}
	}
	if !ordered {
		t.Error("notices posted out of order")
	}
	limited := 0
	for _, r := range h.fake.Requests() {
		if r.Status == 429 {
			limited++
		}
	}
	if limited != 12 {
		t.Errorf("%d requests were rate limited, want 12", limited)
	}
}

// flakyOutbox loses the first "delivered" marks, as a crash between a post
// and its mark would.
type flakyOutbox struct {
	Outbox
	mu   sync.Mutex
	lose int
}

func (f *flakyOutbox) MarkOutboxDelivered(ctx context.Context, id int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lose > 0 {
		f.lose--
		return errors.New("lost")
	}
	return f.Outbox.MarkOutboxDelivered(ctx, id)
}

func TestRestartDeliversEachNoticeOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	id := h.task("web", "Restarted")
	h.stop() // the daemon stops with notices undelivered

	texts := h.notices(id, 6)
	cfg := h.bot.cfg
	// The new bot's first marks are lost, so it posts those notices again:
	// Discord's nonce makes the repeats the same messages.
	box := &flakyOutbox{Outbox: h.st, lose: 3}
	b, err := New(cfg, h.svc, box)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	// Six posts, and three more for the marks that were lost.
	err = h.fake.WaitFor(h.ctx(), func() bool {
		posts := 0
		for _, r := range h.fake.Requests() {
			if r.Method == "POST" && r.Path == "/api/v9/channels/"+projectChannel+"/messages" && r.Status == 200 {
				posts++
			}
		}
		return posts >= 9
	})
	if err != nil {
		t.Fatalf("notices not all delivered: %v", err)
	}
	cancel()
	<-done
	if pending, err := h.st.PendingOutbox(context.Background(), 100); err != nil || len(pending) != 0 {
		t.Errorf("still pending: %+v, %v", pending, err)
	}
	counts, ordered := countIn(h.fake.Messages(projectChannel), texts)
	for i, c := range counts {
		if c != 1 {
			t.Errorf("notice %d posted %d times", i, c)
		}
	}
	if !ordered {
		t.Error("notices out of order")
	}
}

func TestGatewayReconnectKeepsAnswering(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	// A connection is cut only after discordgo's heartbeat goroutine sent
	// its first heartbeat on it (see discordtest.DropConnection): on a slow
	// machine the bot can be ready before that goroutine ran.
	if err := h.fake.WaitFor(h.ctx(), func() bool { return h.fake.Heartbeats() >= 1 }); err != nil {
		t.Fatalf("no heartbeat: %v", err)
	}
	h.fake.DropConnection(4000)
	// The fake counts no heartbeat of a connection it dropped: those after
	// this are the next connection's.
	beats := h.fake.Heartbeats()
	// Dispatched while the bot is away: replayed on resume, answered once.
	i := h.command(alice, controlChannel, "project", subOpt("list"))
	_, text := h.answer(i, 1)
	if !strings.Contains(text, "`web`") {
		t.Errorf("after reconnect: %q", text)
	}
	if err := h.fake.WaitFor(h.ctx(), func() bool { return h.fake.Resumes() >= 1 && h.fake.Heartbeats() > beats }); err != nil {
		t.Fatalf("no resume, or no heartbeat on the resumed connection: %v (resumes %d)", err, h.fake.Resumes())
	}
	h.fake.SendReconnect()
	_, text = h.answer(h.command(alice, controlChannel, "project", subOpt("show", strOpt("project", "web"))), 1)
	if !strings.Contains(text, "Project web") {
		t.Errorf("after op 7: %q", text)
	}
	if n := len(i.Responses()); n != 1 {
		t.Errorf("the replayed interaction got %d responses", n)
	}
}

func TestDestructiveCommandsNeedAdminAndConfirmation(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	id := h.task("web", "Doomed")

	r, text := h.answer(h.command(alice, controlChannel, "task", subOpt("delete", strOpt("task", id))), 1)
	if !ephemeralFlag(r) || !strings.Contains(text, "needs an admin") {
		t.Errorf("non-admin delete: %q", text)
	}
	r, text = h.answer(h.command(root, controlChannel, "task", subOpt("delete", strOpt("task", id))), 1)
	if !ephemeralFlag(r) || !strings.Contains(text, "Really delete task") {
		t.Fatalf("admin delete asks: %q", text)
	}
	ask := r.Message
	if ask == nil {
		t.Fatal("the confirmation has no message")
	}
	// Cancel does nothing.
	r, text = h.answer(h.press(root, ask, h.buttonID(ask, "aq|cancel")), 1)
	if r.Type != discordgo.InteractionResponseUpdateMessage || !strings.Contains(text, "nothing was done") {
		t.Errorf("cancel: %q", text)
	}
	if _, err := h.st.GetTask(context.Background(), id); err != nil {
		t.Fatalf("cancelled delete deleted: %v", err)
	}
	// A non-admin cannot press Confirm either.
	r, _ = h.answer(h.press(alice, ask, h.buttonID(ask, "aq|confirm|")), 1)
	if !ephemeralFlag(r) {
		t.Errorf("non-admin confirm: %+v", r)
	}
	_, text = h.answer(h.press(root, ask, h.buttonID(ask, "aq|confirm|")), 1)
	if !strings.Contains(text, "deleted") {
		t.Errorf("confirm: %q", text)
	}
	if _, err := h.st.GetTask(context.Background(), id); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("after delete: %v", err)
	}
	// Pressed again: says what happened instead of acting.
	r, text = h.answer(h.press(root, ask, h.buttonID(ask, "aq|confirm|")), 1)
	if !ephemeralFlag(r) && r.Type != discordgo.InteractionResponseUpdateMessage || strings.Contains(text, "deleted by") ||
		!strings.Contains(text, id) {
		t.Errorf("second confirm: %q", text)
	}
}

func TestProgressIsCoalescedPerTask(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	h := newHarness(t, func(c *Config, _ *discordtest.Options) { c.Clock = clock; c.ProgressInterval = 5 * time.Second })
	h.project("web")
	other := h.task("web", "Other")
	id, run := h.runningTask("web", "Chatty")
	th := h.waitThread(id)
	cfg := h.bot.cfg
	h.stop()
	progress := func(k int) {
		t.Helper()
		if err := h.st.Notify(context.Background(), fmt.Sprintf("progress:%d:%d", run.ID, k),
			models.NewProgressNotice("web", models.ProgressNotice{TaskID: id, RunID: run.ID, Message: fmt.Sprintf("step %d", k)})); err != nil {
			t.Fatal(err)
		}
	}
	posts := func() []string {
		var out []string
		for _, m := range h.fake.Messages(th) {
			if strings.Contains(m.Content, "• step") {
				out = append(out, m.Content)
			}
		}
		return out
	}
	// Fourteen lines waiting: one post with the newest ten.
	for k := 1; k <= 14; k++ {
		progress(k)
	}
	h.bot = h.start(cfg)
	first := h.waitMessage(th, "step 14")
	if !strings.Contains(first.Content, "(4 earlier lines)") || strings.Contains(first.Content, "step 4\n") || !strings.Contains(first.Content, "step 5\n") {
		t.Errorf("coalesced post:\n%s", first.Content)
	}
	// A line within the interval waits: a later notice of another task,
	// read in the same pass, goes out while it waits.
	progress(15)
	h.notices(other, 1)
	h.bot.Wake()
	h.waitMessage(projectChannel, "plan error number 000")
	if got := posts(); len(got) != 1 {
		t.Fatalf("posts before the interval passed: %q", got)
	}
	clock.Advance(5 * time.Second)
	h.bot.Wake()
	h.waitMessage(th, "step 15")
	if got := posts(); len(got) != 2 || got[1] != "• step 15" {
		t.Errorf("posts: %q", got)
	}
}

// waitThread waits for a task's thread and returns its id.
func (h *harness) waitThread(taskID string) string {
	h.t.Helper()
	var id string
	err := h.fake.WaitFor(h.ctx(), func() bool {
		for _, th := range h.fake.Threads() {
			if strings.HasPrefix(th.Name, taskID+" ") {
				id = th.ID
				return true
			}
		}
		return false
	})
	if err != nil {
		h.t.Fatalf("no thread for %s: %v", taskID, err)
	}
	return id
}

func TestLongTextsAreSplitOrAttached(t *testing.T) {
	t.Parallel()
	cases := []struct {
		n     int
		parts int
		file  bool
	}{{100, 1, false}, {3000, 2, false}, {20000, 1, true}}
	for _, c := range cases {
		body := strings.Repeat("line of agent output\n", c.n/21+1)[:c.n]
		ps := textParts(true, "head", body)
		if len(ps) != c.parts || (ps[0].File != nil) != c.file {
			t.Errorf("%d chars: %d parts, file %v", c.n, len(ps), ps[0].File != nil)
		}
		for _, p := range ps {
			if len([]rune(p.Content)) > messageLimit {
				t.Errorf("%d chars: a part of %d characters", c.n, len([]rune(p.Content)))
			}
		}
		if c.file && len(ps[0].File.Body) < c.n {
			t.Errorf("%d chars: the file holds %d", c.n, len(ps[0].File.Body))
		}
	}
}

func TestProgressPostsFitOneMessage(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("[x](y) ", 60)
	var lines []string
	for k := range 25 {
		lines = append(lines, fmt.Sprintf("step %d %s", k, long))
	}
	ps := progressParts(lines)
	if len(ps) != 1 || len([]rune(ps[0].Content)) > messageLimit {
		t.Fatalf("%d parts, first of %d characters", len(ps), len([]rune(ps[0].Content)))
	}
	c := ps[0].Content
	if !strings.Contains(c, "step 24") || strings.Contains(c, "step 3 ") || !strings.Contains(c, "earlier lines)*") {
		t.Errorf("kept lines:\n%s", c)
	}
	if strings.Contains(c, "[x](y)") {
		t.Error("a masked link survived escaping")
	}
}

func TestNonceAndRedaction(t *testing.T) {
	t.Parallel()
	if n := nonce(9_999_999_999_999, 9_999_999_999_999+500, 3); len(n) > 25 {
		t.Errorf("nonce %q has %d characters", n, len(n))
	}
	if nonce(5, 5, 0) == nonce(5, 6, 0) {
		t.Error("a bigger batch reuses the nonce of a smaller one")
	}
	got := redactURL(`Post "https://discord.com/api/v9/interactions/123/aW50ZXJhY3Rpb24.secret-x/callback": EOF`)
	if strings.Contains(got, "secret") || !strings.Contains(got, "interactions/123/<token>") {
		t.Errorf("redacted: %s", got)
	}
	if got := renderProject(models.Project{ID: "p", Repo: &models.RepoConfig{URL: "https://bob:hunter2@example.com/r.git"}}); strings.Contains(got, "hunter2") {
		t.Errorf("repo url: %s", got)
	}
}

func TestRefusedNoticeIsGivenUpAndTheTaskGoesOn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	id := h.task("web", "Refused")
	// A notice that can never be delivered (its payload is broken) is given
	// up at once; the task's next notice is still delivered.
	if err := h.st.Notify(context.Background(), "bad-payload",
		models.Notice{Kind: models.NoticePlanFailed, ProjectID: "web", TaskID: id, Payload: "not an object"}); err != nil {
		t.Fatal(err)
	}
	texts := h.notices(id, 1)
	h.bot.Wake()
	h.waitMessage(projectChannel, texts[0])
	h.stop() // finishes the pass under way
	pending, _ := h.st.PendingOutbox(context.Background(), 100)
	if len(pending) != 0 {
		t.Errorf("pending: %+v", pending)
	}
}

func TestAChattyTaskDoesNotHoldOthersBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config, _ *discordtest.Options) {
		c.Clock = clocktest.New(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
		c.ProgressInterval = time.Hour
	})
	h.project("web")
	other := h.task("web", "Quiet")
	id, run := h.runningTask("web", "Chatty")
	th := h.waitThread(id)
	progress := func(k int) {
		t.Helper()
		if err := h.st.Notify(context.Background(), fmt.Sprintf("progress:%d:%d", run.ID, k),
			models.NewProgressNotice("web", models.ProgressNotice{TaskID: id, RunID: run.ID, Message: fmt.Sprintf("line %d", k)})); err != nil {
			t.Fatal(err)
		}
	}
	progress(0)
	h.bot.Wake()
	h.waitMessage(th, "line 0")
	// More than a page of lines that must wait an hour, then another
	// task's notice: it goes out.
	for k := 1; k <= 2*outboxBatch+10; k++ {
		progress(k)
	}
	texts := h.notices(other, 1)
	h.bot.Wake()
	h.waitMessage(projectChannel, texts[0])
}
