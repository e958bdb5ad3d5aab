package orchestrator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// linkedUser makes the user's repository of a LINK project: main checked
// out, clean, holding notes.md.
func linkedUser(t *testing.T) string {
	t.Helper()
	user := filepath.Join(t.TempDir(), "mine")
	gitOut(t, "init", "-q", "-b", "main", user)
	if err := os.WriteFile(filepath.Join(user, "notes.md"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitOut(t, "-C", user, "add", "-A")
	gitOut(t, "-C", user, "commit", "-q", "-m", "mine")
	return user
}

// mergeOf returns the merge commit of a task on the user's main.
func mergeOf(t *testing.T, user, taskID string) string {
	t.Helper()
	out := gitOut(t, "-C", user, "log", "--format=%H %s", "main")
	for _, line := range strings.Split(out, "\n") {
		if hash, subject, _ := strings.Cut(line, " "); strings.HasPrefix(subject, "Merge "+taskID+":") {
			return hash
		}
	}
	t.Fatalf("no merge of %s on main:\n%s", taskID, out)
	return ""
}

// upAndDown adds an upstream task writing up.txt and a dependent writing
// down.txt to the project linked.
func upAndDown(e *e2e) (up, down string) {
	ids := e.add("linked",
		models.BatchTask{LocalID: "up", Title: "Upstream work",
			Description: fmt.Sprintf(work, "up.txt", "from-up", "up", "wrote up.txt")},
		models.BatchTask{LocalID: "down", Title: "Downstream work", Dependencies: []models.BatchDependency{{ID: "up"}},
			Description: fmt.Sprintf(work, "down.txt", "from-down", "down", "wrote down.txt")})
	return ids["up"], ids["down"]
}

func TestE2ELinkLandsInTheCheckedOutDefaultBranch(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	user := linkedUser(t)
	e.project("linked", &models.RepoConfig{ID: "mine", SourceType: models.RepoLink, SourcePath: user, DefaultBranch: "main"},
		models.ProjectSettings{})
	e.cli("codex-1", "codex", "linked")
	up, down := upAndDown(e)
	e.start()
	ut := e.waitStatus(up, models.StatusCompleted)
	if !strings.Contains(ut.StatusReason, "merged into main") {
		t.Fatalf("the upstream completed with %q", ut.StatusReason)
	}
	e.waitStatus(down, models.StatusCompleted)
	// main advanced in place, as `git pull --ff-only` would: branch, index, files.
	if got := gitOut(t, "-C", user, "branch", "--show-current"); got != "main" {
		t.Fatalf("the user's tree is on %q", got)
	}
	if st := gitOut(t, "-C", user, "status", "--porcelain"); st != "" {
		t.Fatalf("the user's tree is not at main:\n%s", st)
	}
	for file, want := range map[string]string{"up.txt": "from-up\n", "down.txt": "from-down\n", "notes.md": "mine\n"} {
		if b, err := os.ReadFile(filepath.Join(user, file)); err != nil || string(b) != want {
			t.Fatalf("%s in the user's tree: %q %v", file, b, err)
		}
	}
	// The dependent's branch started from the upstream's landed work.
	if got := gitOut(t, "-C", user, "show", mergeOf(t, user, down)+"^2:up.txt"); got != "from-up" {
		t.Fatalf("the dependent's branch has up.txt %q", got)
	}
}

func TestE2ELinkLandingWaitsForLocalChangesThenLands(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	user := linkedUser(t)
	e.project("linked", &models.RepoConfig{ID: "mine", SourceType: models.RepoLink, SourcePath: user, DefaultBranch: "main"},
		models.ProjectSettings{})
	e.cli("codex-1", "codex", "linked")
	// The user is editing notes.md, uncommitted.
	notes := filepath.Join(user, "notes.md")
	if err := os.WriteFile(notes, []byte("mine, edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head := gitOut(t, "-C", user, "rev-parse", "main")
	index, err := os.ReadFile(filepath.Join(user, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	up, down := upAndDown(e)
	e.start()
	var ut models.Task
	e.waitFor("the upstream's landing to wait", func() bool {
		ut = e.task(up)
		return ut.WaitingCode == models.WaitingLanding
	})
	if ut.Status != models.StatusVerifying || strings.Contains(ut.StatusReason, "merged") ||
		!strings.Contains(ut.WaitingReason, "main is checked out in "+user+" with local changes (notes.md)") ||
		!strings.Contains(ut.WaitingReason, "agentqueued land linked") {
		t.Fatalf("the waiting landing: %s %q %q", ut.Status, ut.StatusReason, ut.WaitingReason)
	}
	ctx := context.Background()
	if d, err := e.st.GetTaskDetail(ctx, up); err != nil || d.Verification == nil || d.Verification.Phase != models.PhaseLanding {
		t.Fatalf("the detail of the waiting task: %+v %v", d.Verification, err)
	}
	// Nothing of the user's was touched.
	if b, _ := os.ReadFile(notes); string(b) != "mine, edited\n" {
		t.Fatalf("notes.md is %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(user, ".git", "index")); string(b) != string(index) {
		t.Fatal("the user's index changed")
	}
	if got := gitOut(t, "-C", user, "rev-parse", "main"); got != head {
		t.Fatal("the user's main moved")
	}
	if _, err := os.Stat(filepath.Join(user, "up.txt")); !os.IsNotExist(err) {
		t.Fatal("up.txt appeared in the user's tree")
	}
	// The dependent waits for its upstream's work to land.
	if dt := e.task(down); dt.Status != models.StatusDefined {
		t.Fatalf("the dependent is %s", dt.Status)
	}
	// land while the changes are still there: still waiting, nothing touched.
	res, err := e.o.Land(ctx, "linked")
	if err != nil || len(res.Landed) != 0 || len(res.Waiting) != 1 || res.Waiting[0].TaskID != up ||
		!strings.Contains(res.Waiting[0].Reason, "notes.md") {
		t.Fatalf("land with local changes: %+v %v", res, err)
	}
	if b, _ := os.ReadFile(notes); string(b) != "mine, edited\n" || gitOut(t, "-C", user, "rev-parse", "main") != head {
		t.Fatal("land touched the user's tree")
	}
	if _, err := e.o.Land(ctx, "nope"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("land of an unknown project: %v", err)
	}
	// The user stashes; land finishes it, and the dependent runs on top.
	gitOut(t, "-C", user, "stash", "-q")
	res, err = e.o.Land(ctx, "linked")
	if err != nil || len(res.Landed) != 1 || res.Landed[0].TaskID != up || res.Landed[0].Status != models.StatusCompleted ||
		len(res.Waiting) != 0 {
		t.Fatalf("land after the stash: %+v %v", res, err)
	}
	if ut = e.task(up); ut.WaitingCode != "" || !strings.Contains(ut.StatusReason, "merged into main") {
		t.Fatalf("the landed task: %q %q", ut.WaitingCode, ut.StatusReason)
	}
	if b, _ := os.ReadFile(filepath.Join(user, "up.txt")); string(b) != "from-up\n" {
		t.Fatalf("up.txt in the user's tree: %q", b)
	}
	e.waitStatus(down, models.StatusCompleted)
	if got := gitOut(t, "-C", user, "show", mergeOf(t, user, down)+"^2:up.txt"); got != "from-up" {
		t.Fatalf("the dependent's branch has up.txt %q", got)
	}
	gitOut(t, "-C", user, "stash", "pop", "-q")
	if b, _ := os.ReadFile(notes); string(b) != "mine, edited\n" {
		t.Fatalf("the user's change is lost: %q", b)
	}
	// Nothing waits any more.
	if res, err := e.o.Land(ctx, "linked"); err != nil || len(res.Landed)+len(res.Waiting) != 0 {
		t.Fatalf("land with nothing waiting: %+v %v", res, err)
	}
}

func TestE2ELinkApprovedWorkWaitsToLandThenLands(t *testing.T) {
	t.Parallel()
	e := newE2E(t)
	user := linkedUser(t)
	e.project("linked", &models.RepoConfig{ID: "mine", SourceType: models.RepoLink, SourcePath: user, DefaultBranch: "main"},
		models.ProjectSettings{PRMode: models.PRNever})
	e.cli("codex-1", "codex", "linked")
	id := e.add("linked", models.BatchTask{LocalID: "t", Title: "Needs a person", RequiresApproval: true,
		Description: fmt.Sprintf(work, "gated.txt", "gated", "gated", "wrote gated.txt")})["t"]
	e.start()
	e.waitStatus(id, models.StatusAwaitingApproval)
	notes := filepath.Join(user, "notes.md")
	if err := os.WriteFile(notes, []byte("mine, edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	head := gitOut(t, "-C", user, "rev-parse", "main")
	ctx := context.Background()
	_, err := e.o.Approve(ctx, id, "ana", "ship it")
	if models.ErrorCodeOf(err) != models.CodeConflict || !strings.Contains(err.Error(), "waits to land") ||
		!strings.Contains(err.Error(), "local changes (notes.md)") {
		t.Fatalf("approve with local changes: %v", err)
	}
	tk := e.task(id)
	if tk.Status != models.StatusAwaitingApproval || tk.WaitingCode != models.WaitingLanding ||
		gitOut(t, "-C", user, "rev-parse", "main") != head {
		t.Fatalf("the approved task: %s %q %q", tk.Status, tk.WaitingCode, tk.WaitingReason)
	}
	if b, _ := os.ReadFile(notes); string(b) != "mine, edited\n" {
		t.Fatalf("notes.md is %q", b)
	}
	// A second decision is refused: it is decided.
	if _, err := e.o.Reject(ctx, id, "bob", "no"); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("a rejection of approved work: %v", err)
	}
	gitOut(t, "-C", user, "commit", "-q", "-am", "my edit") // committed this time: main moved
	res, err := e.o.Land(ctx, "linked")
	// A retry the loop started while the approval was carried out may have
	// landed it already, once the tree was clean: then nothing waits.
	landedMeanwhile := err == nil && len(res.Landed)+len(res.Waiting)+len(res.Failed) == 0 &&
		e.task(id).Status == models.StatusCompleted
	if !landedMeanwhile && (err != nil || len(res.Landed) != 1 || res.Landed[0].Status != models.StatusCompleted) {
		t.Fatalf("land: %+v %v", res, err)
	}
	if tk = e.task(id); !strings.Contains(tk.StatusReason, "approved by ana: ship it") ||
		!strings.Contains(tk.StatusReason, "merged into main") {
		t.Fatalf("the landed task: %q", tk.StatusReason)
	}
	for file, want := range map[string]string{"gated.txt": "gated\n", "notes.md": "mine, edited\n"} {
		if b, err := os.ReadFile(filepath.Join(user, file)); err != nil || string(b) != want {
			t.Fatalf("%s in the user's tree: %q %v", file, b, err)
		}
	}
	if st := gitOut(t, "-C", user, "status", "--porcelain"); st != "" {
		t.Fatalf("the user's tree is not at main:\n%s", st)
	}
}
