package orchestrator

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestE2ERunOutcomesAreHonest runs the fake claude through the outcomes
// that used to look like success: denied tool calls, a run that changed
// nothing without saying so, and checks what a run that said so, or a
// project without a repository, ends as, and that the landing reason never
// claims a merge that did not happen.
func TestE2ERunOutcomesAreHonest(t *testing.T) {
	t.Parallel()
	zero := 0
	cases := []struct {
		name        string
		cli         string // claude unless set
		noRepo      bool
		description string
		want        models.TaskStatus
		// reason must contain each of these; never must not.
		reason []string
		never  string
		events []string
		denied []string
	}{
		{name: "denied writes fail the run", description: "@deny Write\n@deny Edit",
			want:   models.StatusBlocked,
			reason: []string{"claude denied 2 tool call(s) (Write, Edit)", "permission_mode", "allowed_tools"},
			never:  "merged into", events: []string{"AGENT_FAILED"}, denied: []string{"Write", "Edit"}},
		{name: "denied even though the agent completed", description: "@deny Write\n@complete wrote it",
			want: models.StatusBlocked, reason: []string{"claude denied 1 tool call(s) (Write)"},
			never: "merged into", events: []string{"AGENT_FAILED"}, denied: []string{"Write"}},
		{name: "no changes without saying so fail the verification", description: "@complete looked around",
			want: models.StatusBlocked, reason: []string{"the agent made no changes", "--no-changes"},
			never: "merged into", events: []string{"AGENT_COMPLETED", "VERIFY_FAILED"}},
		{name: "a write codex's sandbox refused is named", cli: "codex", description: "@refuse-write",
			want: models.StatusBlocked, reason: []string{"codex refused a write (patch rejected: writing outside of the project; " +
				"rejected by user approval settings); the agent made no changes"},
			never: "merged into", events: []string{"AGENT_COMPLETED", "VERIFY_FAILED"}},
		{name: "no changes said explicitly complete, without a merge", description: "@complete-no-changes nothing needed changing",
			want: models.StatusCompleted, reason: []string{"the agent made no changes, as it said: nothing to merge"},
			never: "merged into", events: []string{"VERIFY_PASSED"}},
		{name: "outputs for dependents are work done", description: `@complete-outputs {"modules": ["a", "b"]}`,
			want: models.StatusCompleted, reason: []string{"no changes: nothing to merge"}, never: "merged into",
			events: []string{"VERIFY_PASSED"}},
		{name: "a project without a repository completes as before", noRepo: true, description: "@complete looked around",
			want: models.StatusCompleted, reason: []string{"no repository"}, never: "merged into",
			events: []string{"VERIFY_PASSED"}},
		{name: "changes are merged", description: "@write a.txt a\n@commit a\n@complete wrote a",
			want: models.StatusCompleted, reason: []string{"merged into main"}, events: []string{"VERIFY_PASSED"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			var origin string
			var r *models.RepoConfig
			if !c.noRepo {
				origin = bareOrigin(t)
				r = cloneRepo(origin)
			}
			e.project("web", r, models.ProjectSettings{})
			cli := cmp.Or(c.cli, "claude")
			e.cli(cli+"-1", cli, "web")
			id := e.add("web", models.BatchTask{LocalID: "t", Title: "Try it", Description: c.description, MaxRetries: &zero})["t"]
			e.start()
			tk := e.waitStatus(id, c.want)
			d, err := e.st.GetTaskDetail(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			// The reason that ended the work: a blocked task's is the
			// failure that blocked it (kept in its last event's reason).
			reason := tk.StatusReason
			for _, ev := range d.Events {
				if ev.Event == models.EventAgentFailed || ev.Event == models.EventVerifyFailed {
					reason += " | " + ev.Reason
				}
			}
			for _, want := range c.reason {
				if !strings.Contains(reason, want) {
					t.Errorf("reason %q lacks %q", reason, want)
				}
			}
			if c.never != "" && strings.Contains(reason, c.never) {
				t.Errorf("reason %q claims %q", reason, c.never)
			}
			evs := e.events(id)
			for _, want := range c.events {
				if !slices.Contains(evs, want) {
					t.Errorf("events %v lack %s", evs, want)
				}
			}
			if len(d.Runs) != 1 || !slices.Equal(d.Runs[0].DeniedTools, c.denied) {
				t.Fatalf("runs %+v, want one with denied tools %v", d.Runs, c.denied)
			}
			if c.want != models.StatusCompleted && origin != "" {
				if out, err := exec.Command("git", "--git-dir", origin, "log", "--oneline", "main").CombinedOutput(); err != nil ||
					strings.Count(strings.TrimSpace(string(out)), "\n") != 0 {
					t.Errorf("main moved: %s %v", out, err)
				}
			}
		})
	}
}

// TestE2ECodexRunRecordsItsVersion: codex's stream does not say its
// version; the run has it from codex --version.
func TestE2ECodexRunRecordsItsVersion(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.project("web", nil, models.ProjectSettings{})
	e.cli("codex-1", "codex", "web")
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Try it", Description: "@complete done"})["t"]
	e.start()
	e.waitStatus(id, models.StatusCompleted)
	d, err := e.st.GetTaskDetail(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Runs) != 1 || d.Runs[0].CLI != "codex" || d.Runs[0].CLIVersion != "0.169.0" || d.Runs[0].SessionID == "" {
		t.Fatalf("runs %+v", d.Runs)
	}
}

// TestE2ECodexReviewRecordsItsVersion: a codex reviewer's run keeps the
// CLI's version too (read with codex --version, as for a worker's).
func TestE2ECodexReviewRecordsItsVersion(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.project("web", cloneRepo(bareOrigin(t)), models.ProjectSettings{QAAgent: "qa"})
	e.cli("worker", "claude", "web")
	e.cli("qa", "codex", "p") // works on another project: it only reviews here
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Reviewed", VerificationType: models.VerifyQAAgent,
		Description: fmt.Sprintf(work, "f.txt", "v1", "f", "wrote f.txt") + "\n@review @approve fine"})["t"]
	e.start()
	e.waitStatus(id, models.StatusCompleted)
	d, err := e.st.GetTaskDetail(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var review *models.Run
	for i := range d.Runs {
		if d.Runs[i].Kind == models.RunReview {
			review = &d.Runs[i]
		}
	}
	if review == nil || review.CLI != "codex" || review.CLIVersion != "0.169.0" {
		t.Fatalf("the review run %+v (runs %+v)", review, d.Runs)
	}
}

// TestE2ERunRecordsTheCLI checks that a run keeps its CLI's version, a
// pending MCP server at start, its session, its usage with cache tokens and
// its cost, as the task's detail shows them.
func TestE2ERunRecordsTheCLI(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	e.project("web", nil, models.ProjectSettings{})
	e.cli("claude-1", "claude", "web")
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Try it", Description: "@mcp-pending\n@complete done"})["t"]
	e.start()
	e.waitStatus(id, models.StatusCompleted)
	d, err := e.st.GetTaskDetail(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Runs) != 1 {
		t.Fatalf("runs %+v", d.Runs)
	}
	r := d.Runs[0]
	want := models.RunTokens{Input: 1000, Output: 200, CacheRead: 300, CacheWrite: 40}
	if r.CLI != "claude" || r.CLIVersion != "2.1.285" || r.CLIWarning != "" || r.SessionID == "" || r.Usage != want ||
		r.CostUSD == nil || *r.CostUSD != 0.0123 || !slices.Equal(r.MCPNotReady, []string{"agentqueued (pending)"}) {
		t.Fatalf("run %+v", r)
	}
	a, err := e.st.GetAgent(context.Background(), "claude-1")
	if err != nil || a.CLIVersion != "2.1.285" {
		t.Fatalf("agent %+v %v", a, err)
	}
}

// TestAnAgentEndingMidQuestionLeavesItOpen: an agent whose process ends
// by itself while its question waits (the CLI gave up on the call and went
// on to finish) used to have its task resumed at once, without the answer.
// The question stays open, the task waits for it (WAITING_INPUT, its run
// ended), and the answer runs it again at once with the answer in the
// prompt.
func TestAnAgentEndingMidQuestionLeavesItOpen(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *Config) { c.InputTimeout = 10 * time.Hour; c.IdleTimeout = 100 * time.Hour })
	fifo := h.heldAgent("a1")
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "t"})["t"]
	run := h.running()
	_, q := h.askAsync(run, "Which way?")
	release(t, fifo, "0") // the agent finishes without the answer
	h.waitEnd()
	h.settle()
	tk := h.task(id)
	if tk.Status != models.StatusWaitingInput || tk.RetryCount != 0 {
		t.Fatalf("after the agent ended mid-question: %s, %d retries used (%q)", tk.Status, tk.RetryCount, tk.StatusReason)
	}
	qs, err := h.o.OpenQuestions(context.Background())
	if err != nil || len(qs) != 1 || qs[0].ID != q.ID {
		t.Fatalf("open questions: %+v %v", qs, err)
	}
	if _, err := h.o.AnswerQuestion(context.Background(), q.ID, "left", "alice"); err != nil {
		t.Fatal(err)
	}
	r2 := h.waitStart()
	if r2.Attempt != 2 {
		t.Fatalf("resumed run %+v", r2)
	}
	prompt, _ := os.ReadFile(filepath.Join(h.o.cfg.RunDir, id, "2.prompt"))
	if !strings.Contains(string(prompt), "Q: Which way?\nA: left") {
		t.Fatalf("the answer is not in the resumed prompt:\n%s", prompt)
	}
	release(t, fifo, "0")
	h.waitEnd()
}
