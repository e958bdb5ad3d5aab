package service

import (
	"context"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
	"github.com/agentqueued/agentqueued/internal/workflow"
)

// profiles are the configured profiles of these tests.
var profiles = map[string]models.Profile{"careful": {}}

// storeTasks applies the workflow engine's events straight to the store
// (no agent runs in these tests).
type storeTasks struct{ st *store.Store }

func (s storeTasks) ApplyAdminEvent(ctx context.Context, req models.TransitionRequest) (models.TransitionResult, error) {
	return s.st.ApplyEvent(ctx, req)
}

// wantRefusal fails the test unless err is CodeInvalid naming want, or is
// nil when want is empty.
func wantRefusal(t *testing.T, what string, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		return
	}
	if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %v; want invalid naming %q", what, err, want)
	}
}

func TestCreateTasksChecksTheProfiles(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	if _, err := st.CreateProject(ctx, models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Store: st, Profiles: profiles})
	tests := []struct {
		name     string
		profiles []string
		want     string // the refusal's text; empty: created
	}{
		{"none named", []string{"", ""}, ""},
		{"a configured one", []string{"careful"}, ""},
		{"the second unknown", []string{"careful", "reckless"}, `tasks[1].profile: no profile "reckless" is configured`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := models.TaskBatch{ProjectID: "web"}
			for _, p := range tc.profiles {
				b.Tasks = append(b.Tasks, models.BatchTask{Title: tc.name, Profile: p})
			}
			res, err := s.CreateTasks(ctx, b)
			wantRefusal(t, "create", err, tc.want)
			if tc.want == "" && len(res) != len(tc.profiles) {
				t.Errorf("created %+v", res)
			}
		})
	}
}

func TestProjectSettingsMustNameConfiguredProfiles(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	s := New(Config{Store: st, Profiles: profiles, DeskWebhooks: []string{"oncall"}})
	tests := []struct {
		name     string
		settings models.ProjectSettings
		want     string
	}{
		{"none", models.ProjectSettings{}, ""},
		{"a configured webhook", models.ProjectSettings{EscalateWebhook: "oncall"}, ""},
		{"an unknown webhook", models.ProjectSettings{EscalateWebhook: "pager"},
			`settings.escalate_webhook: no desk webhook "pager" is configured (desk.webhooks has oncall)`},
		{"configured", models.ProjectSettings{DefaultProfile: "careful", QAProfile: "careful"}, ""},
		{"unknown default", models.ProjectSettings{DefaultProfile: "ghost"}, `settings.default_profile: no profile "ghost" is configured`},
		{"unknown qa", models.ProjectSettings{QAProfile: "ghost"}, `settings.qa_profile: no profile "ghost" is configured`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			id := "p" + string(rune('a'+i))
			_, err := s.CreateProject(ctx, models.Project{ID: id, Settings: tc.settings})
			wantRefusal(t, "create", err, tc.want)
			if _, err := s.CreateProject(ctx, models.Project{ID: id + "-edited"}); err != nil {
				t.Fatal(err)
			}
			settings := tc.settings
			_, err = s.UpdateProject(ctx, id+"-edited", models.ProjectPatch{Settings: &settings})
			wantRefusal(t, "update", err, tc.want)
			if p, err := s.GetProject(ctx, id+"-edited"); err != nil || (tc.want != "" && p.Settings.DefaultProfile+p.Settings.QAProfile+p.Settings.EscalateWebhook != "") {
				t.Errorf("after the update: %+v, %v", p.Settings, err)
			}
		})
	}
}

func TestGetTaskDetailNamesTheBranchOnceRun(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	for _, p := range []models.Project{
		{ID: "repo", Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: "https://example.com/r.git"}},
		{ID: "plain"},
	} {
		if _, err := st.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.UpsertAgent(ctx, models.Agent{ID: "a1", AgentType: "claude"}); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Store: st})
	tests := []struct {
		name       string
		project    string
		run        bool
		wantBranch string // empty: none named
	}{
		{"run in a project with a repository", "repo", true, "-ship-it"},
		{"not run yet", "repo", false, ""},
		{"run in a project without a repository", "plain", true, ""},
	}
	for _, tc := range tests {
		// Sequential: the one agent claims each task in turn.
		res, err := st.CreateTasks(ctx, models.TaskBatch{ProjectID: tc.project, Tasks: []models.BatchTask{{Title: "Ship it"}}})
		if err != nil {
			t.Fatal(err)
		}
		id := res[0].TaskID
		if tc.run {
			run, _, err := st.ClaimTask(ctx, id, "a1")
			if err != nil {
				t.Fatalf("%s: claim: %v", tc.name, err)
			}
			if _, err := st.StartRun(ctx, run.ID, 1, "/w"); err != nil {
				t.Fatalf("%s: start: %v", tc.name, err)
			}
			if _, err := st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed, ExpectFrom: models.StatusInProgress,
				Outcome: "failed"}); err != nil {
				t.Fatalf("%s: finish: %v", tc.name, err)
			}
		}
		d, err := s.GetTaskDetail(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		switch {
		case tc.wantBranch == "" && d.Task.BranchName != nil:
			t.Errorf("%s: branch %q; want none", tc.name, *d.Task.BranchName)
		case tc.wantBranch != "" && (d.Task.BranchName == nil || *d.Task.BranchName != "aq/"+id+tc.wantBranch):
			t.Errorf("%s: branch %v; want aq/%s%s", tc.name, d.Task.BranchName, id, tc.wantBranch)
		}
	}
	if _, err := s.GetTaskDetail(ctx, "ghost"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("an unknown task: %v; want not_found", err)
	}
}

func TestSaveWorkflowDocumentChecksTheStepsProfiles(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	if _, err := st.CreateProject(ctx, models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	wf, err := workflow.New(workflow.Config{}, st, storeTasks{st})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Store: st, Profiles: profiles, Workflows: wf})
	tests := []struct {
		name, profile, want string
	}{
		{"configured", "careful", ""},
		{"unknown", "ghost", `steps[1] (test).profile: no profile "ghost" is configured`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc := "name: " + tc.name + "\nproject: web\nsteps:\n  - name: build\n    title: Build\n" +
				"  - name: test\n    title: Test\n    profile: " + tc.profile + "\n"
			w, err := s.SaveWorkflowDocument(ctx, "request", []byte(doc))
			wantRefusal(t, "save", err, tc.want)
			if tc.want == "" && w.Origin != models.WorkflowFromAPI {
				t.Errorf("saved %+v; want it from the API", w)
			}
			if _, err := st.GetWorkflow(ctx, tc.name); (err == nil) != (tc.want == "") {
				t.Errorf("stored: %v", err)
			}
		})
	}
}
