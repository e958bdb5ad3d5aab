package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestBudgetReportOfTheCommandLayer(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	limit := int64(40)
	for _, p := range []models.Project{{ID: "web"}, {ID: "api", BudgetLimit: &limit}, {ID: "idle"}} {
		if _, err := st.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	for _, u := range []models.TokenUsage{
		{ProjectID: "web", Input: 10, CreatedAt: now.Add(-10 * time.Minute)},
		{ProjectID: "web", Input: 5, CreatedAt: now.Add(-90 * time.Minute)},
		{ProjectID: "api", Output: 40, CreatedAt: now.Add(-time.Minute)},
	} {
		if err := st.RecordTokenUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name          string
		window        time.Duration
		globalBudget  *int64
		wantWindow    time.Duration
		wantGlobal    int64
		wantBudget    *int64
		wantExhausted bool
	}{
		{"unlimited", time.Hour, nil, time.Hour, 50, nil, false},
		{"longer window", 2 * time.Hour, ptrTo[int64](1000), 2 * time.Hour, 55, ptrTo[int64](1000), false},
		{"reached", time.Hour, ptrTo[int64](50), time.Hour, 50, ptrTo[int64](50), true},
		{"zero lets nothing start", time.Hour, ptrTo[int64](0), time.Hour, 50, ptrTo[int64](0), true},
		{"window unset", 0, nil, orchestrator.DefaultWindow, 55, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := New(Config{Store: st, Window: tc.window, GlobalBudget: tc.globalBudget}).Budget(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.Window.Std() != tc.wantWindow || r.Global.TokensInWindow != tc.wantGlobal || r.Global.Exhausted != tc.wantExhausted ||
				(r.Global.Budget == nil) != (tc.wantBudget == nil) || (r.Global.Budget != nil && *r.Global.Budget != *tc.wantBudget) {
				t.Fatalf("report %+v; want window %s, %d tokens, budget %v, exhausted %v", r, tc.wantWindow, tc.wantGlobal,
					tc.wantBudget, tc.wantExhausted)
			}
			if since := time.Since(r.Since); since < tc.wantWindow || since > tc.wantWindow+time.Minute {
				t.Errorf("since %s, %s ago; want one window ago", r.Since, since)
			}
			byID := map[string]models.ProjectBudget{}
			for _, p := range r.Projects {
				byID[p.ProjectID] = p
			}
			if api := byID["api"]; api.TokensInWindow != 40 || api.TotalTokensUsed != 40 || !api.Exhausted || *api.BudgetLimit != 40 {
				t.Errorf("api: %+v; want its limit reached", api)
			}
			if idle := byID["idle"]; len(r.Projects) != 3 || idle.TokensInWindow != 0 || idle.Exhausted || idle.BudgetLimit != nil {
				t.Errorf("projects %+v", r.Projects)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestEditTaskChecksTheProfile(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	if _, err := st.CreateProject(ctx, models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: "t", Profile: "careful"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := New(Config{Store: st, Profiles: map[string]models.Profile{"careful": {}, "fast": {}}})
	id := res[0].TaskID
	tests := []struct {
		profile string
		want    string // the profile after the edit, or "!" for a refusal
	}{
		{"fast", "fast"},
		{"reckless", "!"},
		{"", ""},
	}
	for _, tc := range tests {
		// Sequential: each case edits the same task.
		got, err := c.EditTask(ctx, id, models.TaskPatch{Profile: &tc.profile})
		if tc.want == "!" {
			if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), `no profile "reckless" is configured`) {
				t.Errorf("profile %q: %v", tc.profile, err)
			}
			continue
		}
		if err != nil || got.Profile != tc.want {
			t.Errorf("profile %q: %+v %v", tc.profile, got, err)
		}
	}
	if got, err := c.EditTask(ctx, id, models.TaskPatch{Title: ptrTo("no profile named")}); err != nil || got.Title != "no profile named" {
		t.Errorf("an edit naming no profile: %+v %v", got, err)
	}
}
