package discord

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// This file walks the happy path of every slash command and every button
// and modal of the bot: what the person reads, who else sees it, and what
// the store holds afterwards.

type opt = *discordgo.ApplicationCommandInteractionDataOption

func numberOpt(name string, v float64) opt {
	return &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: discordgo.ApplicationCommandOptionNumber, Value: v}
}

// channelOpt is a channel option as Discord sends it: the channel's id.
func channelOpt(name, id string) opt {
	return &discordgo.ApplicationCommandInteractionDataOption{Name: name, Type: discordgo.ApplicationCommandOptionChannel, Value: id}
}

// cmdStep is one slash command and what it must answer.
type cmdStep struct {
	name string
	user string // default alice
	cmd  string
	sub  opt
	// ephemeral is whether only the person who asked may see the answer.
	ephemeral bool
	want      []string
	// check, when set, looks at the store (and the answer) afterwards.
	check func(t *testing.T, r discordtest.Response)
}

// runSteps runs command steps in order, each in the control channel.
func (h *harness) runSteps(t *testing.T, steps []cmdStep) {
	t.Helper()
	for _, s := range steps {
		user := s.user
		if user == "" {
			user = alice
		}
		var opts []opt
		if s.sub != nil {
			opts = append(opts, s.sub)
		}
		r, text := h.answer(h.command(user, controlChannel, s.cmd, opts...), 1)
		if r.Kind != "callback" || r.Type != discordgo.InteractionResponseChannelMessageWithSource {
			t.Errorf("%s: answered with %s type %d, want a message callback", s.name, r.Kind, r.Type)
		}
		if got := ephemeralFlag(r); got != s.ephemeral {
			t.Errorf("%s: ephemeral %v, want %v (%q)", s.name, got, s.ephemeral, text)
		}
		for _, w := range s.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: answer lacks %q:\n%s", s.name, w, text)
			}
		}
		if strings.Contains(text, "went wrong") {
			t.Errorf("%s: %q", s.name, text)
		}
		if s.check != nil {
			s.check(t, r)
		}
	}
}

// confirmDestructive runs a destructive command: refused to alice, asked
// of root, whose confirmation it presses. It returns the final answer.
func (h *harness) confirmDestructive(t *testing.T, cmd string, sub opt, ask string) (discordtest.Response, string) {
	t.Helper()
	path := "/" + cmd + " " + sub.Name
	r, text := h.answer(h.command(alice, controlChannel, cmd, sub), 1)
	if !ephemeralFlag(r) || !strings.Contains(text, "`"+path+"` needs an admin") {
		t.Errorf("%s by a non-admin: %q (ephemeral %v)", path, text, ephemeralFlag(r))
	}
	r, text = h.answer(h.command(root, controlChannel, cmd, sub), 1)
	if !ephemeralFlag(r) || text != ask || r.Message == nil {
		t.Fatalf("%s by an admin asks %q (ephemeral %v), want %q", path, text, ephemeralFlag(r), ask)
	}
	r, text = h.answer(h.press(root, r.Message, h.buttonID(r.Message, "aq|confirm|")), 1)
	if r.Type != discordgo.InteractionResponseUpdateMessage || !ephemeralFlag(r) {
		t.Errorf("%s confirmed: type %d ephemeral %v, want the ephemeral question updated", path, r.Type, ephemeralFlag(r))
	}
	if r.Message != nil && len(customIDs(r.Message)) != 0 {
		t.Errorf("%s confirmed: the question keeps its buttons %v", path, customIDs(r.Message))
	}
	return r, text
}

// waitMessageWith waits for a message of a channel that contains every
// one of substrs.
func (h *harness) waitMessageWith(channelID string, substrs ...string) *discordgo.Message {
	h.t.Helper()
	var found *discordgo.Message
	has := func(m *discordgo.Message) bool {
		for _, s := range substrs {
			if !strings.Contains(m.Content, s) {
				return false
			}
		}
		return true
	}
	err := h.fake.WaitFor(h.ctx(), func() bool {
		for _, m := range h.fake.Messages(channelID) {
			if has(m) {
				found = m
				return true
			}
		}
		return false
	})
	if err != nil {
		var all []string
		for _, m := range h.fake.Messages(channelID) {
			all = append(all, fmt.Sprintf("%q", m.Content))
		}
		h.t.Fatalf("no message with %q in %s: %v; messages: %s", substrs, channelID, err, strings.Join(all, ", "))
	}
	return found
}

// startedTask creates a task and starts it on agentID, a command agent
// registered when new; it returns the task's id and its run.
func (h *harness) startedTask(agentID, projectID, title string) (string, models.Run) {
	h.t.Helper()
	ctx := context.Background()
	if _, err := h.st.RegisterAgent(ctx, models.AgentRegistration{ID: agentID, AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "true"}}.Agent()); err != nil && models.ErrorCodeOf(err) != models.CodeConflict {
		h.t.Fatal(err)
	}
	id := h.task(projectID, title)
	run, _, err := h.st.ClaimTask(ctx, id, agentID)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.st.StartRun(ctx, run.ID, 0, h.t.TempDir()); err != nil {
		h.t.Fatal(err)
	}
	return id, run
}

// awaitingApproval creates a task whose work waits for a person's approval.
func (h *harness) awaitingApproval(projectID, title string) string {
	h.t.Helper()
	id := h.task(projectID, title)
	h.apply(id, models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted, models.EventApprovalRequested)
	return id
}

// wantStatus checks a task's status in the store.
func (h *harness) wantStatus(t *testing.T, id string, want models.TaskStatus) {
	t.Helper()
	if got := h.taskStatus(id); got != want {
		t.Errorf("task %s is %s, want %s", id, got, want)
	}
}

// noRefusals reports the REST requests the fake refused: payloads Discord
// would not take.
func noRefusals(t *testing.T, h *harness) {
	t.Helper()
	for _, r := range h.fake.Requests() {
		if r.Status >= 400 {
			t.Errorf("Discord refused %s %s with %d: %s", r.Method, r.Path, r.Status, r.Body)
		}
	}
}

func TestStatusQuestionsAndBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	ctx := context.Background()

	// What waits on a person, made oldest first in the reverse of the order
	// /status lists its kinds: a broken chain, a check by hand, an
	// approval, a question.
	chainRoot := h.task("web", "Root of the chain")
	behind := h.task("web", "Behind the root", chainRoot)
	h.apply(chainRoot, models.EventAssigned, models.EventTimeout)
	h.wantStatus(t, behind, models.StatusBlocked)
	verifying := h.task("web", "Check by hand")
	h.apply(verifying, models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted)
	if err := h.st.SetVerification(ctx, models.Verification{TaskID: verifying, Attempt: 1, Phase: models.PhaseHuman}); err != nil {
		t.Fatal(err)
	}
	approval := h.awaitingApproval("web", "Needs a look")
	asking, run := h.startedTask("agent-q", "web", "Curious work")
	q, err := h.st.AskQuestion(ctx, run.ID, "Which colour?")
	if err != nil {
		t.Fatal(err)
	}

	r, text := h.answer(h.command(alice, controlChannel, "status"), 1)
	if ephemeralFlag(r) {
		t.Error("/status is ephemeral")
	}
	lines := []string{
		fmt.Sprintf("⛓️ `web/%s` Root of the chain — test timeout · 1 task(s) behind it", chainRoot),
		fmt.Sprintf("🔎 `web/%s` Check by hand — verify the change: approve or reject it", verifying),
		fmt.Sprintf("🙋 `web/%s` Needs a look — ", approval),
		fmt.Sprintf("❓ `web/%s` Curious work — Which colour? (#%d)", asking, q.ID),
	}
	actions := []string{
		fmt.Sprintf("→ **Restart %s**", chainRoot),
		fmt.Sprintf("→ **Approve %s**", verifying),
		fmt.Sprintf("→ **Approve %s**", approval),
		fmt.Sprintf("→ **Answer #%d**", q.ID),
	}
	// The asking agent's run is open: it works; the change to check and
	// the one awaiting approval wait to land.
	for _, w := range append(append([]string{"**Agents**", "🤖 `agent-q` (command) — ", "**Tasks**", "`web`: ", "verifying 1",
		"awaiting_approval 1", "waiting_input 1", "blocked 2", "**Waiting on you** (4)",
		"🛠️ agents working **1** · 📦 waiting to land or verify **2**"}, lines...), actions...) {
		if !strings.Contains(text, w) {
			t.Errorf("/status lacks %q:\n%s", w, text)
		}
	}
	// Oldest first: each line after the one before it.
	if i := strings.Index(text, "**Waiting on you**"); i >= 0 {
		waiting, last := text[i:], -1
		for _, l := range lines {
			at := strings.Index(waiting, l)
			if at < last {
				t.Errorf("waiting on you is not oldest first (%q comes too early):\n%s", l, waiting)
			}
			last = at
		}
	}
	if strings.Contains(text, behind) {
		t.Errorf("/status lists %s, blocked behind its root, on its own:\n%s", behind, text)
	}
	// Each item's button is the one its notice carries.
	if r.Message == nil {
		t.Fatal("/status made no message")
	}
	wantIDs := []string{
		customID("event", string(models.EventAdminRestart), chainRoot, string(models.StatusBlocked)),
		customID("approve", verifying), customID("approve", approval),
		customID("answer", strconv.FormatInt(q.ID, 10), asking),
	}
	if ids := customIDs(r.Message); !slices.Equal(ids, wantIDs) {
		t.Errorf("/status buttons %v, want %v", ids, wantIDs)
	}

	// /questions lists the question with its Answer button, for the asker only.
	r, text = h.answer(h.command(alice, controlChannel, "questions"), 1)
	if !ephemeralFlag(r) || !strings.Contains(text, fmt.Sprintf("**#%d** `%s` asks: > Which colour?", q.ID, asking)) {
		t.Errorf("/questions: %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	if r.Message == nil {
		t.Fatal("/questions made no message")
	}
	answerID := customID("answer", strconv.FormatInt(q.ID, 10), asking)
	if ids := customIDs(r.Message); !slices.Equal(ids, []string{answerID}) {
		t.Fatalf("/questions buttons %v, want [%s]", ids, answerID)
	}
	r, _ = h.answer(h.press(alice, r.Message, answerID), 1)
	if r.Type != discordgo.InteractionResponseModal || r.Data == nil || r.Data.CustomID != customID("answer", strconv.FormatInt(q.ID, 10)) ||
		r.Data.Title != fmt.Sprintf("Answer question #%d", q.ID) {
		t.Fatalf("Answer opened %+v, want the answer modal", r)
	}
	r, text = h.answer(h.submit(alice, controlChannel, r.Data.CustomID, "Blue"), 1)
	if ephemeralFlag(r) || text != fmt.Sprintf("💬 <@%s> answered question #%d of `%s`:\n> Blue", alice, q.ID, asking) {
		t.Errorf("answer modal: %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	qs, err := h.st.TaskQuestions(ctx, asking)
	if err != nil || len(qs) != 1 || qs[0].Answer == nil || *qs[0].Answer != "Blue" || qs[0].AnsweredBy != actor(alice) {
		t.Errorf("questions after the answer: %+v, %v", qs, err)
	}
	h.wantStatus(t, asking, models.StatusInProgress)

	h.runSteps(t, []cmdStep{
		{name: "questions when none is open", cmd: "questions", ephemeral: true, want: []string{"No open questions"}},
		{name: "budget", cmd: "budget", want: []string{"**Token usage in the last 24h0m0s**", "all projects: 0 of unlimited"}},
	})
	noRefusals(t, h)
}

func TestProjectCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	project := func(id string) models.Project {
		t.Helper()
		p, err := h.st.GetProject(ctx, id)
		if err != nil {
			t.Fatalf("project %s: %v", id, err)
		}
		return p
	}
	h.runSteps(t, []cmdStep{
		{name: "create", cmd: "project", sub: subOpt("create", strOpt("id", "api"), strOpt("name", "The API"),
			channelOpt("channel", projectChannel), numberOpt("credit_weight", 2.5), intOpt("max_agents", 3), intOpt("budget", 1000)),
			want: []string{"📁 Created project `api`.", "**The API** `api` — ACTIVE", "weight 2.5 · up to 3 agents · 0 tokens used of 1000",
				"channel: <#" + projectChannel + ">"},
			check: func(t *testing.T, _ discordtest.Response) {
				p := project("api")
				if p.Name != "The API" || p.CreditWeight != 2.5 || p.MaxConcurrentAgents != 3 || p.BudgetLimit == nil || *p.BudgetLimit != 1000 ||
					p.DiscordChannelID == nil || *p.DiscordChannelID != projectChannel || p.Status != models.ProjectActive {
					t.Errorf("created project: %+v", p)
				}
			}},
		{name: "create with a repository", cmd: "project", sub: subOpt("create", strOpt("id", "site"), strOpt("repo_url", "https://example.com/site.git")),
			want: []string{"📁 Created project `site`.", "repo: https://example.com/site.git"},
			check: func(t *testing.T, _ discordtest.Response) {
				p, err := h.st.GetProject(ctx, "site")
				if err != nil || p.Repo == nil || p.Repo.URL != "https://example.com/site.git" || p.Repo.SourceType != models.RepoClone {
					t.Errorf("project with a repository: %+v (repo %+v), %v", p, p.Repo, err)
				}
			}},
		{name: "list", cmd: "project", sub: subOpt("list"),
			want: []string{"`api` The API — ACTIVE, weight 2.5, up to 3 agents"}},
		{name: "show", cmd: "project", sub: subOpt("show", strOpt("project", "api")),
			want: []string{"**The API** `api` — ACTIVE", "of 1000"}},
		{name: "edit", cmd: "project", sub: subOpt("edit", strOpt("project", "api"), strOpt("name", "API v2"),
			numberOpt("credit_weight", 1), intOpt("max_agents", 5), intOpt("budget", -1), channelOpt("channel", controlChannel)),
			want: []string{"Updated.\n**API v2** `api` — ACTIVE", "weight 1 · up to 5 agents · 0 tokens used", "channel: <#" + controlChannel + ">"},
			check: func(t *testing.T, r discordtest.Response) {
				p := project("api")
				if p.Name != "API v2" || p.CreditWeight != 1 || p.MaxConcurrentAgents != 5 || p.BudgetLimit != nil ||
					p.DiscordChannelID == nil || *p.DiscordChannelID != controlChannel {
					t.Errorf("edited project: %+v", p)
				}
				if text := r.Data.Content; strings.Contains(text, " of ") {
					t.Errorf("an unlimited budget is shown: %q", text)
				}
			}},
		{name: "pause", cmd: "project", sub: subOpt("pause", strOpt("project", "api")),
			want: []string{"Project `api` is now PAUSED (by <@" + alice + ">)."},
			check: func(t *testing.T, _ discordtest.Response) {
				if st := project("api").Status; st != models.ProjectPaused {
					t.Errorf("paused project is %s", st)
				}
			}},
		{name: "resume", cmd: "project", sub: subOpt("resume", strOpt("project", "api")),
			want: []string{"Project `api` is now ACTIVE (by <@" + alice + ">)."},
			check: func(t *testing.T, _ discordtest.Response) {
				if st := project("api").Status; st != models.ProjectActive {
					t.Errorf("resumed project is %s", st)
				}
			}},
	})

	_, text := h.confirmDestructive(t, "project", subOpt("archive", strOpt("project", "api")), "Really archive project `api`?")
	if want := "🗄️ Project `api` archived by <@" + root + ">."; text != want {
		t.Errorf("archive confirmed: %q, want %q", text, want)
	}
	if st := project("api").Status; st != models.ProjectArchived {
		t.Errorf("archived project is %s", st)
	}
	noRefusals(t, h)
}

func TestTaskCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web", &models.RepoConfig{SourceType: models.RepoInit})
	ctx := context.Background()
	mentionAlice := "<@" + alice + ">"

	draft := h.task("web", "Draft")
	up1, up2 := h.task("web", "Upstream one"), h.task("web", "Upstream two")
	down := h.task("web", "Downstream", up1)
	flaky := h.task("web", "Flaky")
	h.apply(flaky, models.EventAssigned, models.EventAgentStarted, models.EventAgentFailed)
	stuck := h.task("web", "Stuck")
	h.apply(stuck, models.EventAssigned, models.EventTimeout)
	good := h.awaitingApproval("web", "Good work")
	bad := h.awaitingApproval("web", "Bad work")
	asking, run := h.startedTask("agent-ask", "web", "Asking work")
	q, err := h.st.AskQuestion(ctx, run.ID, "Tabs or spaces?")
	if err != nil {
		t.Fatal(err)
	}

	h.runSteps(t, []cmdStep{
		{name: "edit", cmd: "task", sub: subOpt("edit", strOpt("task", draft), strOpt("title", "Final"), intOpt("priority", 7),
			strOpt("test_commands", "go test ./...; go vet ./..."), strOpt("verification", "HUMAN"), boolOpt("requires_approval", true)),
			want: []string{fmt.Sprintf("✏️ `%s` changed by %s (title, priority, test_commands, verification_type, requires_approval).", draft, mentionAlice)},
			check: func(t *testing.T, _ discordtest.Response) {
				got, err := h.st.GetTask(ctx, draft)
				if err != nil || got.Title != "Final" || got.Priority != 7 || !slices.Equal(got.TestCommands, []string{"go test ./...", "go vet ./..."}) ||
					got.VerificationType != models.VerifyHuman || !got.RequiresApproval || got.Status != models.StatusReady {
					t.Errorf("edited task: %+v, %v", got, err)
				}
			}},
		{name: "edit routing", cmd: "task", sub: subOpt("edit", strOpt("task", draft), strOpt("agent_type", "codex"), strOpt("timeout", "90m"),
			intOpt("expected_count", 4), strOpt("kind", "ingest"), strOpt("metadata", "source=web; lang=go")),
			want: []string{fmt.Sprintf("✏️ `%s` changed by %s (kind, metadata, expected_count, timeout, agent_type).", draft, mentionAlice)},
			check: func(t *testing.T, _ discordtest.Response) {
				got, err := h.st.GetTask(ctx, draft)
				if err != nil || got.AgentType != "codex" || got.Timeout != models.Duration(90*time.Minute) || got.ExpectedCount != 4 ||
					got.Kind != "ingest" || !maps.Equal(got.Metadata, map[string]string{"source": "web", "lang": "go"}) {
					t.Errorf("edited task: %+v, %v", got, err)
				}
			}},
		{name: "edit clears routing", cmd: "task", sub: subOpt("edit", strOpt("task", draft), strOpt("agent_type", "-"), strOpt("timeout", "0"),
			strOpt("kind", "-"), strOpt("metadata", "-")),
			want: []string{fmt.Sprintf("✏️ `%s` changed by %s (kind, metadata, timeout, agent_type).", draft, mentionAlice)},
			check: func(t *testing.T, _ discordtest.Response) {
				got, err := h.st.GetTask(ctx, draft)
				if err != nil || got.AgentType != "" || got.Timeout != 0 || got.Kind != "" || len(got.Metadata) != 0 || got.ExpectedCount != 4 {
					t.Errorf("cleared task: %+v, %v", got, err)
				}
			}},
		{name: "edit with a bad timeout", cmd: "task", sub: subOpt("edit", strOpt("task", draft), strOpt("timeout", "soon")),
			ephemeral: true, want: []string{`timeout: "soon" is not a duration`}},
		{name: "edit with bad metadata", cmd: "task", sub: subOpt("edit", strOpt("task", draft), strOpt("metadata", "source")),
			ephemeral: true, want: []string{`metadata: "source" is not key=value`}},
		{name: "edit of a running task's type", cmd: "task", sub: subOpt("edit", strOpt("task", asking), strOpt("agent_type", "codex")),
			ephemeral: true, want: []string{"is WAITING_INPUT: a task that is being worked on cannot be edited"}},
		{name: "deps", cmd: "task", sub: subOpt("deps", strOpt("task", down), strOpt("add", up2), strOpt("remove", up1)),
			want: []string{fmt.Sprintf("🔗 `%s` (DEFINED) now waits for `%s`.", down, up2)},
			check: func(t *testing.T, _ discordtest.Response) {
				d, err := h.st.GetTaskDetail(ctx, down)
				if err != nil || len(d.Dependencies) != 1 || d.Dependencies[0].Upstream != up2 || !d.Dependencies[0].RequiresSuccess {
					t.Errorf("dependencies after the change: %+v, %v", d.Dependencies, err)
				}
			}},
		{name: "restart", cmd: "task", sub: subOpt("restart", strOpt("task", flaky)),
			want:  []string{fmt.Sprintf("Restarted `%s` by %s: FAILED → READY.", flaky, mentionAlice)},
			check: func(t *testing.T, _ discordtest.Response) { h.wantStatus(t, flaky, models.StatusReady) }},
		{name: "skip", cmd: "task", sub: subOpt("skip", strOpt("task", stuck)),
			want:  []string{fmt.Sprintf("Skipped `%s` by %s: BLOCKED → COMPLETED.", stuck, mentionAlice)},
			check: func(t *testing.T, _ discordtest.Response) { h.wantStatus(t, stuck, models.StatusCompleted) }},
		{name: "approve", cmd: "task", sub: subOpt("approve", strOpt("task", good), strOpt("note", "Looks right")),
			want: []string{fmt.Sprintf("👍 `%s` approved by %s (now COMPLETED).", good, mentionAlice)},
			check: func(t *testing.T, _ discordtest.Response) {
				h.wantStatus(t, good, models.StatusCompleted)
				h.svc.mu.Lock()
				defer h.svc.mu.Unlock()
				if !slices.Equal(h.svc.approved, []string{good}) {
					t.Errorf("approved %v, want [%s]", h.svc.approved, good)
				}
			}},
		{name: "reject", cmd: "task", sub: subOpt("reject", strOpt("task", bad), strOpt("feedback", "Add tests")),
			want: []string{fmt.Sprintf("👎 `%s` rejected by %s (now READY): > Add tests", bad, mentionAlice)},
			check: func(t *testing.T, _ discordtest.Response) {
				h.wantStatus(t, bad, models.StatusReady)
				fb, err := h.st.TaskFeedback(ctx, bad)
				if err != nil || len(fb) != 1 || fb[0].Verdict != models.VerdictReject || fb[0].Text != "Add tests" || fb[0].Source != actor(alice) {
					t.Errorf("feedback of the rejected task: %+v, %v", fb, err)
				}
			}},
		{name: "answer", cmd: "task", sub: subOpt("answer", strOpt("task", asking), strOpt("answer", "Spaces")),
			want: []string{fmt.Sprintf("💬 %s answered question #%d of `%s`:\n> Spaces", mentionAlice, q.ID, asking)},
			check: func(t *testing.T, _ discordtest.Response) {
				h.wantStatus(t, asking, models.StatusInProgress)
				qs, err := h.st.TaskQuestions(ctx, asking)
				if err != nil || len(qs) != 1 || qs[0].Answer == nil || *qs[0].Answer != "Spaces" || qs[0].AnsweredBy != actor(alice) {
					t.Errorf("question after the answer: %+v, %v", qs, err)
				}
			}},
		{name: "result before there is one", cmd: "task", sub: subOpt("result", strOpt("task", asking)), ephemeral: true,
			want: []string{fmt.Sprintf("`%s` has no result yet (IN_PROGRESS).", asking)},
			check: func(t *testing.T, _ discordtest.Response) {
				if err := h.st.SaveResult(ctx, asking, run.ID, models.Completion{Summary: "Used spaces throughout", FilesChanged: []string{"a.go", "b.go"}}); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "result", cmd: "task", sub: subOpt("result", strOpt("task", asking)),
			want: []string{fmt.Sprintf("📋 Result of `%s` Asking work\n> Used spaces throughout\nfiles: `a.go`, `b.go`", asking)}},
		{name: "diff", cmd: "task", sub: subOpt("diff", strOpt("task", flaky)), ephemeral: true,
			want: []string{fmt.Sprintf("⚠️ task %s has not run yet: there is no change to show", flaky)}},
	})

	// Stopping a running task takes an admin and a confirmation.
	running, _ := h.startedTask("agent-stop", "web", "Long job")
	_, text := h.confirmDestructive(t, "task", subOpt("stop", strOpt("task", running)), fmt.Sprintf("Really stop task `%s`?", running))
	if want := fmt.Sprintf("Stopped `%s` by <@%s>: IN_PROGRESS → BLOCKED.", running, root); text != want {
		t.Errorf("stop confirmed: %q, want %q", text, want)
	}
	h.wantStatus(t, running, models.StatusBlocked)
	noRefusals(t, h)
}

func TestAgentCommands(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	agent := func(id string) (models.Agent, error) { return h.st.GetAgent(ctx, id) }
	noAgent := func(id string) func(t *testing.T, _ discordtest.Response) {
		return func(t *testing.T, _ discordtest.Response) {
			if a, err := agent(id); models.ErrorCodeOf(err) != models.CodeNotFound {
				t.Errorf("agent %s: %+v, %v; want none", id, a, err)
			}
		}
	}
	add := func(id, typ string) opt {
		return subOpt("add", strOpt("id", id), strOpt("type", typ), strOpt("projects", "web, api"))
	}
	h.runSteps(t, []cmdStep{
		{name: "add by a non-admin", cmd: "agent", sub: add("claude-1", "claude"), ephemeral: true,
			want: []string{"`/agent add` needs an admin"}, check: noAgent("claude-1")},
		{name: "add of a command agent", user: root, cmd: "agent", sub: add("shell-1", "command"), ephemeral: true,
			want: []string{"type: choose claude, codex, cursor or aider", "configuration file",
				"agentqueued ctl agent add"}, check: noAgent("shell-1")},
		{name: "add", user: root, cmd: "agent", sub: add("claude-1", "claude"),
			want: []string{"🤖 Registered agent `claude-1` (claude)."},
			check: func(t *testing.T, _ discordtest.Response) {
				a, err := agent("claude-1")
				if err != nil || a.AgentType != "claude" || a.State != models.AgentIdle || a.Paused || !slices.Equal(a.Projects, []string{"web", "api"}) {
					t.Errorf("registered agent: %+v, %v", a, err)
				}
			}},
		{name: "list", cmd: "agent", sub: subOpt("list"), want: []string{"🤖 `claude-1` (claude) — IDLE"}},
		{name: "pause", cmd: "agent", sub: subOpt("pause", strOpt("agent", "claude-1")),
			want: []string{"Agent `claude-1` paused by <@" + alice + ">."},
			check: func(t *testing.T, _ discordtest.Response) {
				if a, err := agent("claude-1"); err != nil || !a.Paused {
					t.Errorf("paused agent: %+v, %v", a, err)
				}
			}},
		{name: "list a paused agent", cmd: "agent", sub: subOpt("list"), want: []string{"🤖 `claude-1` (claude) — IDLE, paused"}},
		{name: "resume", cmd: "agent", sub: subOpt("resume", strOpt("agent", "claude-1")),
			want: []string{"Agent `claude-1` resumed by <@" + alice + ">."},
			check: func(t *testing.T, _ discordtest.Response) {
				if a, err := agent("claude-1"); err != nil || a.Paused {
					t.Errorf("resumed agent: %+v, %v", a, err)
				}
			}},
	})

	// An agent's profile is the configuration file's to set: /agent add
	// does not offer it.
	for _, c := range h.fake.Commands() {
		for _, sub := range c.Options {
			if c.Name != "agent" || sub.Name != "add" {
				continue
			}
			for _, o := range sub.Options {
				if o.Name == "profile" {
					t.Errorf("/agent add offers the option %q (%q)", o.Name, o.Description)
				}
			}
		}
	}

	// Cancel leaves the agent; a second ask, confirmed, removes it.
	r, text := h.answer(h.command(root, controlChannel, "agent", subOpt("remove", strOpt("agent", "claude-1"))), 1)
	if !ephemeralFlag(r) || text != "Really remove agent `claude-1`?" || r.Message == nil {
		t.Fatalf("remove asks %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	r, text = h.answer(h.press(root, r.Message, h.buttonID(r.Message, "aq|cancel")), 1)
	if r.Type != discordgo.InteractionResponseUpdateMessage || text != "Cancelled; nothing was done." {
		t.Errorf("cancel: type %d %q", r.Type, text)
	}
	if _, err := agent("claude-1"); err != nil {
		t.Errorf("a cancelled removal removed: %v", err)
	}
	_, text = h.confirmDestructive(t, "agent", subOpt("remove", strOpt("agent", "claude-1")), "Really remove agent `claude-1`?")
	if !strings.HasPrefix(text, "🗑️ Agent `claude-1` removed by <@"+root+">.") {
		t.Errorf("remove confirmed: %q", text)
	}
	noAgent("claude-1")(t, discordtest.Response{})
	noRefusals(t, h)
}

// pressUpdates presses a notice's button and checks that the answer updates
// the notice for everyone: its text followed by want, its buttons gone.
func (h *harness) pressUpdates(t *testing.T, notice *discordgo.Message, buttonID, want string) {
	t.Helper()
	r, text := h.answer(h.press(alice, notice, buttonID), 1)
	if r.Type != discordgo.InteractionResponseUpdateMessage || ephemeralFlag(r) {
		t.Errorf("%s: type %d ephemeral %v, want the notice updated", buttonID, r.Type, ephemeralFlag(r))
	}
	if text != notice.Content+"\n"+want {
		t.Errorf("%s: notice now reads %q, want %q", buttonID, text, notice.Content+"\n"+want)
	}
	if r.Message != nil && len(customIDs(r.Message)) != 0 {
		t.Errorf("%s: the notice keeps its buttons %v", buttonID, customIDs(r.Message))
	}
}

func TestFailedBlockedAndChainNoticeButtons(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	ctx := context.Background()
	by := "<@" + alice + ">"

	// Failed: View error shows the run's error; Skip completes the task.
	failing, run := h.startedTask("agent-f", "web", "Breaks")
	if _, err := h.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed, ExpectFrom: models.StatusInProgress,
		Reason: "tests failed", Outcome: "failed", Error: "exit status 1: FAIL TestThing"}); err != nil {
		t.Fatal(err)
	}
	failed := h.waitMessageWith(projectChannel, "❌ `"+failing+"` Breaks failed", ": tests failed")
	if ids := customIDs(failed); len(ids) != 4 || ids[3] != customID("event", "ADMIN_CANCEL", failing, "FAILED") {
		t.Errorf("failed notice buttons %v", ids)
	}
	r, text := h.answer(h.press(alice, failed, customID("error", failing)), 1)
	if !ephemeralFlag(r) || text != fmt.Sprintf("Last error of `%s` (1 recorded):\n```\nexit status 1: FAIL TestThing\n```", failing) {
		t.Errorf("view error: %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	h.pressUpdates(t, failed, customID("event", "ADMIN_SKIP", failing, "FAILED"),
		fmt.Sprintf("Skipped `%s` by %s: FAILED → COMPLETED.", failing, by))
	h.wantStatus(t, failing, models.StatusCompleted)

	// Blocked: Restart makes it ready again, Skip completes it.
	blocked := func(title string) (string, *discordgo.Message) {
		id := h.task("web", title)
		h.apply(id, models.EventAssigned, models.EventTimeout)
		m := h.waitMessageWith(projectChannel, "⛔ `"+id+"` "+title+" is blocked: test timeout")
		if ids := customIDs(m); !slices.Equal(ids, []string{customID("event", "ADMIN_RESTART", id, "BLOCKED"), customID("event", "ADMIN_SKIP", id, "BLOCKED")}) {
			t.Errorf("blocked notice buttons %v", ids)
		}
		return id, m
	}
	restarted, m := blocked("Stuck once")
	h.pressUpdates(t, m, customID("event", "ADMIN_RESTART", restarted, "BLOCKED"),
		fmt.Sprintf("Restarted `%s` by %s: BLOCKED → READY.", restarted, by))
	h.wantStatus(t, restarted, models.StatusReady)
	skipped, m := blocked("Stuck twice")
	h.pressUpdates(t, m, customID("event", "ADMIN_SKIP", skipped, "BLOCKED"),
		fmt.Sprintf("Skipped `%s` by %s: BLOCKED → COMPLETED.", skipped, by))
	h.wantStatus(t, skipped, models.StatusCompleted)

	// A broken chain: the buttons act on its root and repair what is behind it.
	chain := func(title string) (rootID, behind string, m *discordgo.Message) {
		rootID = h.task("web", title)
		behind = h.task("web", "After "+title, rootID)
		h.apply(rootID, models.EventAssigned, models.EventTimeout)
		h.wantStatus(t, behind, models.StatusBlocked)
		m = h.waitMessageWith(projectChannel, fmt.Sprintf("⛓️ Chain broken at `%s` %s: test timeout\nBlocked with it: `%s`", rootID, title, behind))
		return rootID, behind, m
	}
	rootID, behind, m := chain("Root three")
	h.pressUpdates(t, m, h.buttonID(m, "aq|event|ADMIN_RESTART|"+rootID+"|"),
		fmt.Sprintf("Restarted `%s` by %s: BLOCKED → READY. Reopened 1 blocked dependent(s).", rootID, by))
	h.wantStatus(t, rootID, models.StatusReady)
	h.wantStatus(t, behind, models.StatusDefined)

	rootID, behind, m = chain("Root four")
	h.pressUpdates(t, m, h.buttonID(m, "aq|event|ADMIN_SKIP|"+rootID+"|"),
		fmt.Sprintf("Skipped `%s` by %s: BLOCKED → COMPLETED. Reopened 1 blocked dependent(s). 1 dependent(s) are ready.", rootID, by))
	h.wantStatus(t, rootID, models.StatusCompleted)
	h.wantStatus(t, behind, models.StatusReady)
	noRefusals(t, h)
}

func TestApprovalNoticeButtons(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web", servicetest.Origin(t))
	ctx := context.Background()

	// The task to approve has run in a real checkout: its diff is git's.
	storetest.Agent(t, h.st, "agent-1", "web")
	approved := h.task("web", "Ship it")
	h.kit.Work(approved, "agent-1", map[string]string{"ship.txt": "shipped\n"})
	h.apply(approved, models.EventApprovalRequested)
	notice := h.waitMessageWith(projectChannel, "🙋 `"+approved+"` Ship it needs your approval")
	if ids := customIDs(notice); !slices.Equal(ids, []string{customID("approve", approved), customID("reject", approved),
		customID("diff", approved), customID("event", "ADMIN_CANCEL", approved, "AWAITING_APPROVAL")}) {
		t.Errorf("approval notice buttons %v", ids)
	}
	// Diff shows the change to the person deciding, and decides nothing.
	r, text := h.answer(h.press(alice, notice, customID("diff", approved)), 1)
	if !ephemeralFlag(r) || !strings.HasPrefix(text, fmt.Sprintf("Changes of `%s`:\n```diff\n", approved)) ||
		!strings.Contains(text, "\n+++ b/ship.txt\n@@ -0,0 +1 @@\n+shipped\n") || !strings.HasSuffix(text, "```") {
		t.Errorf("Diff answered %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	h.wantStatus(t, approved, models.StatusAwaitingApproval)
	h.pressUpdates(t, notice, customID("approve", approved), fmt.Sprintf("👍 `%s` approved by <@%s> (now COMPLETED).", approved, alice))
	h.wantStatus(t, approved, models.StatusCompleted)

	// Reject asks what must change; the answer goes back to the agent.
	rejected := h.awaitingApproval("web", "Not yet")
	notice = h.waitMessageWith(projectChannel, "🙋 `"+rejected+"` Not yet needs your approval")
	r, _ = h.answer(h.press(alice, notice, customID("reject", rejected)), 1)
	if r.Type != discordgo.InteractionResponseModal || r.Data == nil || r.Data.CustomID != customID("reject", rejected) ||
		r.Data.Title != "Reject "+rejected {
		t.Fatalf("Reject opened %+v, want the feedback modal", r)
	}
	h.wantStatus(t, rejected, models.StatusAwaitingApproval)
	r, text = h.answer(h.submit(alice, projectChannel, r.Data.CustomID, "Needs tests\nand docs"), 1)
	if ephemeralFlag(r) || text != fmt.Sprintf("👎 `%s` rejected by <@%s> (now READY): > Needs tests\n> and docs", rejected, alice) {
		t.Errorf("reject modal: %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	h.wantStatus(t, rejected, models.StatusReady)
	fb, err := h.st.TaskFeedback(ctx, rejected)
	if err != nil || len(fb) != 1 || fb[0].Verdict != models.VerdictReject || fb[0].Text != "Needs tests\nand docs" || fb[0].Source != actor(alice) {
		t.Errorf("feedback: %+v, %v", fb, err)
	}
	noRefusals(t, h)
}
