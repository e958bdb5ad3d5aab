package models_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func ptr[T any](v T) *T { return &v }

func TestEnumValuesAreSpecNames(t *testing.T) {
	t.Parallel()
	if len(models.TaskStatuses) != 11 {
		t.Fatalf("want 11 statuses, got %d", len(models.TaskStatuses))
	}
	if len(models.TaskEvents) != 33 {
		t.Fatalf("want 23 spec events + 10 extensions, got %d", len(models.TaskEvents))
	}
	for _, tc := range []struct {
		got, want string
	}{
		{string(models.StatusDefined), "DEFINED"},
		{string(models.StatusAwaitingApproval), "AWAITING_APPROVAL"},
		{string(models.EventDepsMet), "DEPS_MET"},
		{string(models.EventAdminRestart), "ADMIN_RESTART"},
		{string(models.VerifyAutoTest), "AUTO_TEST"},
		{string(models.RepoClone), "CLONE"},
		{string(models.AgentIdle), "IDLE"},
		{string(models.ProjectArchived), "ARCHIVED"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
	if models.TaskStatus("DONE").Valid() || models.TaskEvent("FINISH").Valid() {
		t.Error("unknown names must not be valid")
	}
}

func validTask() models.Task {
	t := models.Task{ID: "bold-orbit", ProjectID: "p", Title: "do it", MaxRetries: 3, Priority: 100}
	t.ApplyDefaults()
	return t
}

func TestTaskConstraints(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name    string
		mutate  func(*models.Task)
		wantErr string
	}{
		{"valid", func(*models.Task) {}, ""},
		{"retry over max", func(t *models.Task) { t.RetryCount = 4 }, "retry_count 4"},
		{"retry equal max", func(t *models.Task) { t.RetryCount = 3 }, ""},
		{"paused without resume", func(t *models.Task) { t.Status = models.StatusPaused }, "resume_after"},
		{"paused with resume", func(t *models.Task) { t.Status = models.StatusPaused; t.ResumeAfter = &now }, ""},
		{"assigned without agent", func(t *models.Task) { t.Status = models.StatusAssigned }, "assigned_agent_id"},
		{"in progress without agent", func(t *models.Task) { t.Status = models.StatusInProgress }, "assigned_agent_id"},
		{"in progress with agent", func(t *models.Task) { t.Status = models.StatusInProgress; t.AssignedAgentID = ptr("a1") }, ""},
		{"unknown status", func(t *models.Task) { t.Status = "DONE" }, "unknown task status"},
		{"empty title", func(t *models.Task) { t.Title = "  " }, "title"},
		{"negative priority", func(t *models.Task) { t.Priority = -1 }, "priority"},
		{"bad verification", func(t *models.Task) { t.VerificationType = "MAGIC" }, "verification_type"},
		{"empty test command", func(t *models.Task) { t.TestCommands = []string{"go test", " "} }, "test_commands[1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := validTask()
			tc.mutate(&task)
			err := task.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
			if models.ErrorCodeOf(err) != models.CodeInvalid {
				t.Fatalf("code %s, want invalid", models.ErrorCodeOf(err))
			}
		})
	}
}

func TestProjectValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		p       models.Project
		wantErr string
	}{
		{"minimal", models.Project{ID: "web"}, ""},
		{"bad id", models.Project{ID: "Web App"}, "project id"},
		{"negative weight", models.Project{ID: "web", CreditWeight: -1}, "credit_weight"},
		{"clone without url", models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoClone}}, "repo.url"},
		{"clone", models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: "https://example.com/a.git"}}, ""},
		{"link relative", models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoLink, SourcePath: "src"}}, "repo.source_path"},
		{"link", models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoLink, SourcePath: "/src/web"}}, ""},
		{"init", models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoInit}}, ""},
		{"unknown type", models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: "FORK"}}, "repo.source_type"},
		{"bad branch", models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoInit, DefaultBranch: "a..b"}}, "default_branch"},
		{"relative checkout base", models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoInit, CheckoutBasePath: "x"}}, "checkout_base_path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			p.ApplyDefaults()
			err := p.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if p.CreditWeight != 1 || p.MaxConcurrentAgents != 2 || p.Status != models.ProjectActive {
					t.Fatalf("defaults not applied: %+v", p)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestProjectPatchClearsBudget(t *testing.T) {
	t.Parallel()
	p := models.Project{ID: "web", BudgetLimit: ptr[int64](10)}
	p.ApplyDefaults()
	got, err := models.ProjectPatch{ClearBudgetLimit: true, Name: ptr("Web")}.Apply(p)
	if err != nil || got.BudgetLimit != nil || got.Name != "Web" {
		t.Fatalf("got %+v, %v", got, err)
	}
	// A negative budget is refused, as on create, instead of clearing it.
	if _, err := (models.ProjectPatch{BudgetLimit: ptr[int64](-1)}).Apply(p); models.ErrorCodeOf(err) != models.CodeInvalid ||
		!strings.Contains(models.ErrorMessageOf(err), "budget_limit: must not be negative") {
		t.Fatalf("negative budget: %v", err)
	}
	// In JSON, null clears and survives a round trip; a number sets.
	for _, c := range []struct {
		patch models.ProjectPatch
		json  string
	}{
		{models.ProjectPatch{ClearBudgetLimit: true}, `{"budget_limit":null}`},
		{models.ProjectPatch{ClearBudgetLimit: true, Name: ptr("Web")}, `{"name":"Web","budget_limit":null}`},
		{models.ProjectPatch{BudgetLimit: ptr[int64](5)}, `{"budget_limit":5}`},
	} {
		b, err := json.Marshal(c.patch)
		if err != nil || string(b) != c.json {
			t.Fatalf("marshal %+v = %s, %v; want %s", c.patch, b, err, c.json)
		}
		var back models.ProjectPatch
		if err := json.Unmarshal(b, &back); err != nil || back.ClearBudgetLimit != c.patch.ClearBudgetLimit ||
			(back.BudgetLimit == nil) != (c.patch.BudgetLimit == nil) {
			t.Fatalf("unmarshal %s = %+v, %v", b, back, err)
		}
	}
	if _, err := (models.ProjectPatch{CreditWeight: ptr(0.0)}).Apply(p); err == nil {
		t.Fatal("zero credit weight accepted")
	}
}

func TestResolveStatusSet(t *testing.T) {
	t.Parallel()
	got, err := models.ResolveStatusSet("Running")
	if err != nil || len(got) != 5 {
		t.Fatalf("Running: %v %v", got, err)
	}
	got, err = models.ResolveStatusSet("READY|completed")
	if err != nil || len(got) != 2 {
		t.Fatalf("READY|completed: %v %v", got, err)
	}
	if got, _ := models.ResolveStatusSet(""); len(got) != 9 {
		t.Fatalf("default must be the 9 unfinished statuses, got %v", got)
	}
	if _, err := models.ResolveStatusSet("Sleeping"); err == nil || !strings.Contains(err.Error(), "Sleeping") {
		t.Fatalf("want error naming the status, got %v", err)
	}
}

func TestUniqueTaskNameAddsSuffixOnCollision(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	base := models.RandomTaskName(rand.New(rand.NewPCG(1, 2)))
	taken := map[string]bool{base: true, base + "-2": true}
	got, err := models.UniqueTaskName(r, func(s string) (bool, error) { return taken[s], nil })
	if err != nil || got != base+"-3" {
		t.Fatalf("got %q, %v; want %q", got, err, base+"-3")
	}
	if !models.ValidTaskID(got) || strings.Count(base, "-") != 1 {
		t.Fatalf("%q is not an adjective-noun id", got)
	}
	boom := errors.New("boom")
	if _, err := models.UniqueTaskName(r, func(string) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Fatalf("lookup error lost: %v", err)
	}
}

// Naming a batch at once gives the names that naming its tasks one by one
// gives, with the same random draws, against names in use and names the
// batch itself takes (10,000 tasks over 10,000 adjective-noun pairs collide
// often).
func TestUniqueTaskNamesAreTheNamesOneByOne(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		n     int
		inUse int
	}{
		{"empty", 0, 0},
		{"one", 1, 0},
		{"small batch, many in use", 50, 20_000},
		{"large batch, none in use", 10_000, 0},
		{"large batch, some in use", 10_000, 3_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Names in use: bare pairs and suffixed ones, drawn apart.
			inUse := map[string]bool{}
			pick := rand.New(rand.NewPCG(7, uint64(tc.inUse)))
			for range tc.inUse {
				name := models.RandomTaskName(pick)
				if k := pick.IntN(4); k > 1 {
					name += "-" + strconv.Itoa(k)
				}
				inUse[name] = true
			}
			r := rand.New(rand.NewPCG(3, uint64(tc.n)))
			var want []string
			mine := map[string]bool{}
			for range tc.n {
				name, err := models.UniqueTaskName(r, func(s string) (bool, error) { return mine[s] || inUse[s], nil })
				if err != nil {
					t.Fatal(err)
				}
				mine[name] = true
				want = append(want, name)
			}
			calls, asked := 0, 0
			got, err := models.UniqueTaskNames(rand.New(rand.NewPCG(3, uint64(tc.n))), tc.n, func(names []string) ([]string, error) {
				calls++
				asked += len(names)
				var in []string
				for _, s := range names {
					if inUse[s] {
						in = append(in, s)
					}
				}
				return in, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("name %d: %q, one by one %q", i, got[i], want[i])
					}
				}
				t.Fatalf("%d names, want %d", len(got), len(want))
			}
			if calls > 10 || asked > 2*tc.n+tc.inUse {
				t.Fatalf("%d calls asking about %d names for %d tasks", calls, asked, tc.n)
			}
		})
	}
	boom := errors.New("boom")
	if _, err := models.UniqueTaskNames(rand.New(rand.NewPCG(1, 1)), 3, func([]string) ([]string, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("lookup error lost: %v", err)
	}
}

func TestErrorsNeverLeakInternals(t *testing.T) {
	t.Parallel()
	err := errors.New("sql: database is locked at /secret/path")
	if got := models.ErrorMessageOf(err); strings.Contains(got, "secret") {
		t.Fatalf("leaked %q", got)
	}
	wrapped := models.WrapError(models.CodeNotFound, err, "task %s not found", "x")
	if models.ErrorCodeOf(wrapped) != models.CodeNotFound || !errors.Is(wrapped, err) {
		t.Fatal("wrap lost code or cause")
	}
}

func TestProjectPatchKeepsRepoID(t *testing.T) {
	t.Parallel()
	p := models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: "/old.git"}}
	p.ApplyDefaults()
	got, err := models.ProjectPatch{Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: "/new.git"}}.Apply(p)
	if err != nil || got.Repo.ID != "web" || got.Repo.URL != "/new.git" {
		t.Fatalf("got %+v, %v", got.Repo, err)
	}
	_, err = models.ProjectPatch{Repo: &models.RepoConfig{ID: "web2", SourceType: models.RepoClone, URL: "/new.git"}}.Apply(p)
	if err == nil || !strings.Contains(err.Error(), "repo.id") {
		t.Fatalf("changing the repo id: %v", err)
	}
}

func TestPRSettings(t *testing.T) {
	t.Parallel()
	plain, approval := models.Task{}, models.Task{RequiresApproval: true}
	for _, c := range []struct {
		mode            string
		plain, approval bool
	}{{"", false, true}, {models.PRWhenRequired, false, true}, {models.PRNever, false, false}, {models.PRAlways, true, true}} {
		s := models.ProjectSettings{PRMode: c.mode}
		if s.NeedsPR(plain) != c.plain || s.NeedsPR(approval) != c.approval {
			t.Errorf("pr_mode %q: %v %v", c.mode, s.NeedsPR(plain), s.NeedsPR(approval))
		}
	}
	for _, bad := range []models.ProjectSettings{{PRMode: "sometimes"}, {PRReviewers: []string{""}}, {PRLabels: []string{"a,b"}}} {
		if err := bad.Validate(); models.ErrorCodeOf(err) != models.CodeInvalid {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	good := models.ProjectSettings{PRMode: models.PRAlways, PRReviewers: []string{"alice"}, PRLabels: []string{"agent work"}}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
}
