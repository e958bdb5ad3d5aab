package orchestrator

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// onMain reports whether the origin's main holds path.
func onMain(t *testing.T, origin, path string) bool {
	t.Helper()
	return exec.Command("git", "--git-dir", origin, "cat-file", "-e", "main:"+path).Run() == nil
}

// A task that requires approval and gets no pull request waits, unmerged,
// in AWAITING_APPROVAL for a person, whatever pr_mode and the GitHub
// configuration say; only an approval lands it, and its dependents wait
// for that.
func TestE2ERequiresApprovalWithoutPullRequestWaitsForAPerson(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		settings models.ProjectSettings
		why      string
		// dependent is what the dependent, which does not require
		// approval, ends as once the task is approved.
		dependent models.TaskStatus
	}{
		{"pr_mode never", models.ProjectSettings{PRMode: models.PRNever}, "pr_mode is never", models.StatusCompleted},
		{"no GitHub", models.ProjectSettings{}, "no GitHub is configured", models.StatusCompleted},
		// pr_mode always blocks a task that cannot have a pull request
		// unless a person can approve it instead.
		{"pr_mode always and no GitHub", models.ProjectSettings{PRMode: models.PRAlways}, "no GitHub is configured", models.StatusBlocked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			origin := bareOrigin(t)
			e.project("web", cloneRepo(origin), tc.settings)
			e.cli("claude-1", "claude", "web")
			ids := e.add("web", models.BatchTask{LocalID: "t", Title: "Needs a person", RequiresApproval: true,
				Description: fmt.Sprintf(work, "gated.txt", "gated", "gated", "wrote it")},
				models.BatchTask{LocalID: "d", Title: "After it", Description: "@complete-no-changes nothing to change",
					Dependencies: []models.BatchDependency{{ID: "t"}}},
				// The same agent works on another task while the first waits:
				// its checkout moves on, and the waiting work stays reachable.
				models.BatchTask{LocalID: "o", Title: "Meanwhile", Description: fmt.Sprintf(work, "other.txt", "other", "other", "other")})
			e.start()
			ctx := context.Background()
			tk := e.waitStatus(ids["t"], models.StatusAwaitingApproval)
			e.waitFor("the other task to end", func() bool {
				st := e.task(ids["o"]).Status
				return st == models.StatusCompleted || st == models.StatusBlocked
			})
			if !strings.Contains(tk.StatusReason, tc.why) || !slices.Contains(e.events(ids["t"]), "APPROVAL_REQUESTED") ||
				slices.Contains(e.events(ids["t"]), "PR_UNAVAILABLE") {
				t.Fatalf("awaiting with %q, events %v", tk.StatusReason, e.events(ids["t"]))
			}
			if onMain(t, origin, "gated.txt") {
				t.Fatal("work awaiting approval was merged")
			}
			if td, err := e.st.GetTaskDetail(ctx, ids["t"]); err != nil || td.Verification == nil ||
				td.Verification.Phase != models.PhaseApproval {
				t.Fatalf("the detail does not show what the task waits for: %+v %v", td.Verification, err)
			}
			if d := e.task(ids["d"]); d.Status != models.StatusDefined {
				t.Fatalf("the dependent is %s before the approval", d.Status)
			}
			diff, err := e.o.TaskDiff(ctx, ids["t"])
			if err != nil || !strings.Contains(diff, "+gated") || !strings.Contains(diff, "gated.txt") {
				t.Fatalf("diff while awaiting approval: %q %v", diff, err)
			}
			res, err := e.o.Approve(ctx, ids["t"], "ana", "looks right")
			if err != nil || res.To != models.StatusCompleted {
				t.Fatalf("approve: %+v %v", res, err)
			}
			if got := gitOut(t, "--git-dir", origin, "show", "main:gated.txt"); got != "gated" {
				t.Fatalf("main gated.txt = %q", got)
			}
			if tk := e.task(ids["t"]); !strings.Contains(tk.StatusReason, "approved by ana: looks right") ||
				!strings.Contains(tk.StatusReason, "merged into main") {
				t.Fatalf("completed with %q", tk.StatusReason)
			}
			if _, err := e.o.Approve(ctx, ids["t"], "ana", ""); models.ErrorCodeOf(err) != models.CodeConflict {
				t.Fatalf("a second approval: %v", err)
			}
			e.waitStatus(ids["d"], tc.dependent)
		})
	}
}

// A rejection returns the task to its agent with the feedback in its next
// prompt, and the task waits for a person again after the next attempt.
func TestE2ERejectedApprovalRunsAgainWithTheFeedback(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{PRMode: models.PRNever})
	e.cli("claude-1", "claude", "web")
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Needs a person", RequiresApproval: true,
		Description: fmt.Sprintf(work, "page.html", "<p>hi</p>", "page", "wrote the page")})["t"]
	e.start()
	ctx := context.Background()
	e.waitStatus(id, models.StatusAwaitingApproval)
	if _, err := e.o.Reject(ctx, id, "ana", " "); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("a rejection without feedback: %v", err)
	}
	// The rejection returns the task to READY (ADMIN_RESTART); the answer
	// gives its status once the decision was carried out, which a round may
	// already have moved on to the next attempt's assignment.
	res, err := e.o.Reject(ctx, id, "ana", "add a heading")
	if err != nil || !slices.Contains([]models.TaskStatus{models.StatusReady, models.StatusAssigned, models.StatusInProgress}, res.To) {
		t.Fatalf("reject: %+v %v", res, err)
	}
	if evs := e.events(id); !slices.Contains(evs, string(models.EventAdminRestart)) {
		t.Fatalf("the rejection wrote no ADMIN_RESTART: %v", evs)
	}
	if _, err := e.o.Approve(ctx, id, "bob", ""); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("an approval after the rejection: %v", err)
	}
	if onMain(t, origin, "page.html") {
		t.Fatal("rejected work was merged")
	}
	e.waitFor("the second attempt to await approval", func() bool {
		run, _, _ := e.st.LastWorkRun(ctx, id)
		return run.Attempt == 2 && e.task(id).Status == models.StatusAwaitingApproval
	})
	if pr := e.prompt(id, 2); !strings.Contains(pr, "ana: add a heading") {
		t.Fatalf("the second prompt lacks the feedback:\n%s", pr)
	}
	if res, err := e.o.Approve(ctx, id, "ana", ""); err != nil || res.To != models.StatusCompleted {
		t.Fatalf("approve: %+v %v", res, err)
	}
	if got := e.events(id); !slices.Contains(got, "ADMIN_RESTART") || !slices.Contains(got, "HUMAN_APPROVED") {
		t.Fatalf("events %v", got)
	}
	if !onMain(t, origin, "page.html") {
		t.Fatal("the approved work is not on main")
	}
}

// An approval whose merge conflicts with what reached main meanwhile
// returns the task to its agent with the conflict, as a verification's
// conflict would.
func TestE2EApprovalThatConflictsReturnsTheTask(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{PRMode: models.PRNever})
	e.cli("claude-1", "claude", "web")
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Edit the readme", RequiresApproval: true,
		Description: fmt.Sprintf(work, "README.md", "mine", "readme", "edited")})["t"]
	e.start()
	ctx := context.Background()
	e.waitStatus(id, models.StatusAwaitingApproval)
	// Someone else changes the same file on main meanwhile.
	other := filepath.Join(t.TempDir(), "other")
	gitOut(t, "clone", "-q", origin, other)
	if err := os.WriteFile(filepath.Join(other, "README.md"), []byte("theirs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, "-C", other, "commit", "-q", "-am", "theirs")
	gitOut(t, "-C", other, "push", "-q", "origin", "main")
	if _, err := e.o.Approve(ctx, id, "ana", ""); err != nil {
		t.Fatalf("approve: %v", err)
	}
	d, err := e.st.GetTaskDetail(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	// The task may have been assigned again already: look for its return.
	i := slices.IndexFunc(d.Events, func(r models.EventRecord) bool { return r.Event == models.EventAdminRestart })
	if i < 0 || d.Events[i].From != models.StatusAwaitingApproval || !strings.Contains(d.Events[i].Reason, "conflicts") {
		t.Fatalf("not returned with the conflict: %+v", d.Events)
	}
	if got := gitOut(t, "--git-dir", origin, "show", "main:README.md"); got != "theirs" {
		t.Fatalf("main README.md = %q", got)
	}
	e.waitFor("the next attempt to await approval", func() bool {
		run, _, _ := e.st.LastWorkRun(ctx, id)
		return run.Attempt == 2 && e.task(id).Status == models.StatusAwaitingApproval
	})
	if pr := e.prompt(id, 2); !strings.Contains(pr, "README.md") || !strings.Contains(pr, "conflict") {
		t.Fatalf("the second prompt lacks the conflict:\n%s", pr)
	}
}

// A task that must land through a pull request only because its project's
// pr_mode is always, and cannot have one, is still blocked with the reason.
func TestE2EPullRequestAlwaysWithoutGitHubIsBlocked(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{PRMode: models.PRAlways})
	e.cli("claude-1", "claude", "web")
	ids := e.add("web", models.BatchTask{LocalID: "t", Title: "Needs a PR",
		Description: fmt.Sprintf(work, "pr.txt", "x", "x", "x")},
		models.BatchTask{LocalID: "d", Title: "After it", Dependencies: []models.BatchDependency{{ID: "t"}}})
	e.start()
	tk := e.waitStatus(ids["t"], models.StatusBlocked)
	if !strings.Contains(tk.StatusReason, "no GitHub is configured") || !slices.Contains(e.events(ids["t"]), "PR_UNAVAILABLE") {
		t.Fatalf("blocked with %q, events %v", tk.StatusReason, e.events(ids["t"]))
	}
	if d := e.waitStatus(ids["d"], models.StatusBlocked); d.CascadeRootID != ids["t"] {
		t.Fatalf("dependent %+v", d)
	}
	if onMain(t, origin, "pr.txt") {
		t.Fatal("work needing a pull request was merged")
	}
}

// A decision recorded on the verification but not carried out — the
// daemon stopped in between — is carried out by the loop, as after a
// restart: an approval merges and completes, a rejection returns the task
// with the feedback.
func TestE2ERecordedApprovalDecisionIsCarriedOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		phase models.VerificationPhase
		note  models.VerificationNote
		want  models.TaskEvent
	}{
		{models.PhaseApproved, models.VerificationNote{Actor: "ana", Text: "fine"}, models.EventHumanApproved},
		{models.PhaseRejected, models.VerificationNote{Actor: "ana", Text: "not like this"}, models.EventAdminRestart},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			t.Parallel()
			e := newE2E(t)
			origin := bareOrigin(t)
			e.project("web", cloneRepo(origin), models.ProjectSettings{PRMode: models.PRNever})
			e.cli("claude-1", "claude", "web")
			id := e.add("web", models.BatchTask{LocalID: "t", Title: "Needs a person", RequiresApproval: true,
				Description: fmt.Sprintf(work, "gated.txt", "gated", "gated", "wrote it")})["t"]
			e.start()
			ctx := context.Background()
			e.waitStatus(id, models.StatusAwaitingApproval)
			v, ok, err := e.st.GetVerification(ctx, id)
			if err != nil || !ok || v.Phase != models.PhaseApproval {
				t.Fatalf("verification while awaiting approval: %+v %v %v", v, ok, err)
			}
			// Recorded as Approve and Reject record it, then left alone.
			if moved, err := e.st.SwitchApproval(ctx, id, v.Attempt, models.PhaseApproval, tc.phase, tc.note); err != nil || !moved {
				t.Fatalf("record the decision: %v %v", moved, err)
			}
			e.waitFor("the decision to be carried out", func() bool {
				return slices.Contains(e.events(id), string(tc.want))
			})
			merged := onMain(t, origin, "gated.txt")
			if merged != (tc.want == models.EventHumanApproved) {
				t.Fatalf("after %s: merged %v, events %v", tc.want, merged, e.events(id))
			}
			if tc.want == models.EventAdminRestart {
				fb, err := e.st.TaskFeedback(ctx, id)
				if err != nil || len(fb) != 1 || fb[0].Text != "not like this" || fb[0].Source != "ana" {
					t.Fatalf("feedback %+v %v", fb, err)
				}
			}
		})
	}
}

// Of an approval and a rejection given at once, exactly one decides; the
// other is told the task was decided meanwhile, and the outcome is the
// winner's: merged and COMPLETED, or unmerged and READY again.
func TestE2EApprovalAndRejectionAtOnceDecideOnce(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	origin := bareOrigin(t)
	e.project("web", cloneRepo(origin), models.ProjectSettings{PRMode: models.PRNever})
	e.cli("claude-1", "claude", "web")
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Contested", RequiresApproval: true,
		Description: fmt.Sprintf(work, "gated.txt", "gated", "gated", "wrote it")})["t"]
	e.start()
	ctx := context.Background()
	e.waitStatus(id, models.StatusAwaitingApproval)
	errs := make(chan error, 2)
	go func() { _, err := e.o.Approve(ctx, id, "ana", ""); errs <- err }()
	go func() { _, err := e.o.Reject(ctx, id, "bob", "no"); errs <- err }()
	var won, lost int
	for range 2 {
		switch err := <-errs; {
		case err == nil:
			won++
		case models.ErrorCodeOf(err) == models.CodeConflict:
			lost++
		default:
			t.Fatalf("a decision failed: %v", err)
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("%d decisions won, %d lost", won, lost)
	}
	ev := e.events(id)
	approved, rejected := slices.Contains(ev, "HUMAN_APPROVED"), slices.Contains(ev, "ADMIN_RESTART")
	if approved == rejected || onMain(t, origin, "gated.txt") != approved {
		t.Fatalf("approved %v, rejected %v, merged %v: %v", approved, rejected, onMain(t, origin, "gated.txt"), ev)
	}
}

// An approval whose merge fails for another reason than a conflict leaves
// the task waiting, unmerged, and tells the person why; once the cause is
// gone, approving again lands it.
func TestE2EApprovalWhoseMergeFailsKeepsWaiting(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	// A non-bare origin: its main may be checked out, and then cannot be moved.
	seed := filepath.Join(t.TempDir(), "origin")
	gitOut(t, "init", "-q", "-b", "main", seed)
	if err := os.WriteFile(filepath.Join(seed, "README.md"), []byte("# web\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, "-C", seed, "add", "-A")
	gitOut(t, "-C", seed, "commit", "-q", "-m", "init")
	gitOut(t, "-C", seed, "checkout", "-q", "--detach")
	e.project("web", cloneRepo(seed), models.ProjectSettings{PRMode: models.PRNever})
	e.cli("claude-1", "claude", "web")
	id := e.add("web", models.BatchTask{LocalID: "t", Title: "Needs a person", RequiresApproval: true,
		Description: fmt.Sprintf(work, "gated.txt", "gated", "gated", "wrote it")})["t"]
	e.start()
	ctx := context.Background()
	e.waitStatus(id, models.StatusAwaitingApproval)
	gitOut(t, "-C", seed, "checkout", "-q", "main") // main cannot be moved now
	_, err := e.o.Approve(ctx, id, "ana", "")
	if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "could not be merged") ||
		!strings.Contains(err.Error(), "still awaits approval") {
		t.Fatalf("approve while main cannot move: %v", err)
	}
	if tk := e.task(id); tk.Status != models.StatusAwaitingApproval {
		t.Fatalf("after the failed merge the task is %s", tk.Status)
	}
	if d, err := e.st.GetTaskDetail(ctx, id); err != nil || d.Verification == nil || d.Verification.Phase != models.PhaseApproval ||
		!strings.Contains(d.Verification.Detail(), "could not be merged") {
		t.Fatalf("the detail after the failed merge: %+v %v", d.Verification, err)
	}
	gitOut(t, "-C", seed, "checkout", "-q", "--detach")
	if res, err := e.o.Approve(ctx, id, "ana", ""); err != nil || res.To != models.StatusCompleted {
		t.Fatalf("approve again: %+v %v", res, err)
	}
	if got := gitOut(t, "-C", seed, "show", "main:gated.txt"); got != "gated" {
		t.Fatalf("main gated.txt = %q", got)
	}
}

// With GitHub configured and the repository on it, pr_mode never still
// opens no pull request: a task that requires approval waits for a person
// in AWAITING_APPROVAL, and only the approval merges it.
func TestE2EPullRequestNeverWithGitHubWaitsForAPerson(t *testing.T) {
	t.Parallel()
	p := newPREnv(t, models.ProjectSettings{PRMode: models.PRNever}, false)
	id := p.add("web", models.BatchTask{LocalID: "t", Title: "Gated", RequiresApproval: true})["t"]
	p.start()
	tk := p.waitStatus(id, models.StatusAwaitingApproval)
	if tk.PRURL != nil || len(p.gh.PRs("acme", "shop")) != 0 || !strings.Contains(tk.StatusReason, "pr_mode is never") {
		t.Fatalf("awaiting %+v with pull requests %v", tk, p.gh.PRs("acme", "shop"))
	}
	file := "main:" + id + ".txt"
	if out, err := exec.Command("git", "--git-dir", p.gh.RepoDir("acme", "shop"), "cat-file", "-e", file).CombinedOutput(); err == nil {
		t.Fatalf("work awaiting approval is on main: %s", out)
	}
	if res, err := p.o.Approve(context.Background(), id, "ana", ""); err != nil || res.To != models.StatusCompleted {
		t.Fatalf("approve: %+v %v", res, err)
	}
	if got := gitOut(t, "--git-dir", p.gh.RepoDir("acme", "shop"), "show", file); !strings.Contains(got, "work of "+id) {
		t.Fatalf("%s = %q", file, got)
	}
	if n := len(p.gh.PRs("acme", "shop")); n != 0 {
		t.Fatalf("%d pull requests opened", n)
	}
	p.assertTokenNowhere()
}

// With GitHub configured, a task that requires approval in a project whose
// repository is not on GitHub waits for a person without a pull request,
// the reason saying why, instead of being blocked.
func TestE2ERepositoryNotOnGitHubWaitsForAPerson(t *testing.T) {
	t.Parallel()
	p := newPREnv(t, models.ProjectSettings{}, false)
	origin := bareOrigin(t)
	r := cloneRepo(origin)
	r.ID = "local"
	p.project("local", r, models.ProjectSettings{})
	id := p.add("local", models.BatchTask{LocalID: "t", Title: "Gated", RequiresApproval: true})["t"]
	p.start()
	tk := p.waitStatus(id, models.StatusAwaitingApproval)
	if tk.PRURL != nil || !strings.Contains(tk.StatusReason, "no pull request: project local") ||
		slices.Contains(p.events(id), "PR_UNAVAILABLE") {
		t.Fatalf("awaiting with %q, events %v", tk.StatusReason, p.events(id))
	}
	if onMain(t, origin, id+".txt") {
		t.Fatal("work awaiting approval was merged")
	}
	if res, err := p.o.Approve(context.Background(), id, "ana", ""); err != nil || res.To != models.StatusCompleted {
		t.Fatalf("approve: %+v %v", res, err)
	}
	if !onMain(t, origin, id+".txt") {
		t.Fatal("the approved work is not on main")
	}
}
