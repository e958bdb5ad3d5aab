package models_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// wantInvalid fails unless err is an invalid error whose message contains
// every part of want; an empty want expects no error.
func wantInvalid(t *testing.T, err error, want ...string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", want)
	}
	if models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("code %s (%v), want invalid", models.ErrorCodeOf(err), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error %q, want one mentioning %q", err, w)
		}
	}
}

func TestTextClasses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		s         string
		max       int
		line      []string // nil: accepted
		multiline []string
	}{
		{"plain", "Fix the login bug", 0, nil, nil},
		{"unicode", "Corriger l'été 🚀 — 修正", 0, nil, nil},
		{"non-breaking space", "a\u00a0b", 0, nil, nil},
		{"zero width joiner", "👩\u200d💻", 0, nil, nil},
		{"NUL", "fix\x00it", 0, []string{"U+0000 (NUL)", "at character 4"}, []string{"U+0000 (NUL)"}},
		{"ESC", "\x1b[31mred", 0, []string{"U+001B (ESC)"}, []string{"U+001B (ESC)"}},
		{"bell", "a\x07", 0, []string{"U+0007"}, []string{"U+0007"}},
		{"DEL", "a\x7f", 0, []string{"U+007F (DEL)"}, []string{"U+007F (DEL)"}},
		{"C1 next line", "a\u0085b", 0, []string{"U+0085"}, []string{"U+0085"}},
		{"C1 CSI", "a\u009bb", 0, []string{"U+009B"}, []string{"U+009B"}},
		{"tab", "a\tb", 0, []string{"U+0009 (tab)", "one line"}, nil},
		{"line feed", "a\nb", 0, []string{"U+000A (line feed)"}, nil},
		{"windows line end", "a\r\nb", 0, []string{"U+000D (carriage return)"}, nil},
		{"lone carriage return", "a\rb", 0, []string{"U+000D"}, []string{"U+000D (carriage return)"}},
		{"carriage return at the end", "a\r", 0, []string{"U+000D"}, []string{"U+000D"}},
		{"line separator", "a\u2028b", 0, []string{"U+2028 (line separator)"}, nil},
		{"invalid UTF-8", "a\xffb", 0, []string{"not valid UTF-8"}, []string{"not valid UTF-8"}},
		{"truncated UTF-8", "caf\xc3", 0, []string{"not valid UTF-8"}, []string{"not valid UTF-8"}},
		{"cap in characters", strings.Repeat("é", 10), 10, nil, nil},
		{"over the cap", strings.Repeat("é", 11), 10, []string{"at most 10 characters (got 11)"}, []string{"at most 10 characters (got 11)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantInvalid(t, models.CheckLine("f", tc.s, tc.max), prefixed("f: ", tc.line)...)
			wantInvalid(t, models.CheckText("f", tc.s, tc.max), prefixed("f: ", tc.multiline)...)
		})
	}
}

// prefixed returns want with the field prefix added to its first part.
func prefixed(prefix string, want []string) []string {
	if len(want) == 0 {
		return nil
	}
	return append([]string{prefix}, want...)
}

func TestCleanLineAndCleanText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, line, text string
		max            int
	}{
		{"plain", "plain", "plain", 0},
		{"a\x00b", "a b", "ab", 0},
		{"  two\n lines\t", "two lines", "  two\n lines\t", 0},
		{"crlf\r\nend\r", "crlf end", "crlf\nend", 0},
		{"bad \xff byte", "bad \uFFFD byte", "bad \uFFFD byte", 0},
		{"\x1b[1mbold\x1b[0m", "[1mbold [0m", "[1mbold[0m", 0},
		{"ééééé", "éé…", "éé…", 3},
	}
	for _, tc := range tests {
		if got := models.CleanLine(tc.in, tc.max); got != tc.line {
			t.Errorf("CleanLine(%q) = %q, want %q", tc.in, got, tc.line)
		}
		if err := models.CheckLine("x", models.CleanLine(tc.in, tc.max), tc.max); err != nil {
			t.Errorf("CleanLine(%q) is not a line: %v", tc.in, err)
		}
		if got := models.CleanText(tc.in, tc.max); got != tc.text {
			t.Errorf("CleanText(%q) = %q, want %q", tc.in, got, tc.text)
		}
		if err := models.CheckText("x", models.CleanText(tc.in, tc.max), tc.max); err != nil {
			t.Errorf("CleanText(%q) is not text: %v", tc.in, err)
		}
	}
}

// TestANulInATitleIsRefused is the regression test of a task whose title
// held a NUL: it was accepted and burnt four agent runs, git refusing it.
func TestANulInATitleIsRefused(t *testing.T) {
	t.Parallel()
	task := validTask()
	task.Title = "Fix the build\x00"
	wantInvalid(t, task.Validate(), "title: control character U+0000 (NUL) at character 14")
}

func TestTaskTextFields(t *testing.T) {
	t.Parallel()
	long := func(n int) string { return strings.Repeat("é", n) } // two bytes each
	tests := []struct {
		name   string
		mutate func(*models.Task)
		want   []string
	}{
		{"title tab", func(t *models.Task) { t.Title = "a\tb" }, []string{"title: control character U+0009"}},
		{"title line feed", func(t *models.Task) { t.Title = "a\nb" }, []string{"title: control character U+000A"}},
		{"title C1", func(t *models.Task) { t.Title = "a\u0090" }, []string{"title: control character U+0090"}},
		{"title invalid UTF-8", func(t *models.Task) { t.Title = "a\xc0\xafb" }, []string{"title: not valid UTF-8"}},
		{"title at the cap in characters", func(t *models.Task) { t.Title = long(models.MaxTitleLen) }, nil},
		{"title over the cap", func(t *models.Task) { t.Title = long(models.MaxTitleLen + 1) }, []string{"title: at most 300 characters"}},
		{"description lines and tabs", func(t *models.Task) { t.Description = "Steps:\n\t1. build\r\n\t2. test\n" }, nil},
		{"description ESC", func(t *models.Task) { t.Description = "see \x1b[31mred" }, []string{"description: control character U+001B"}},
		{"description NUL", func(t *models.Task) { t.Description = "a\x00" }, []string{"description: control character U+0000"}},
		{"description at the cap in characters", func(t *models.Task) { t.Description = long(models.MaxDescriptionLen) }, nil},
		{"description over the cap", func(t *models.Task) { t.Description = long(models.MaxDescriptionLen + 1) },
			[]string{"description: at most 200000 characters"}},
		{"kind line feed", func(t *models.Task) { t.Kind = "bug\n" }, []string{"kind: control character"}},
		{"kind over the cap", func(t *models.Task) { t.Kind = long(models.MaxKindLen + 1) }, []string{"kind: at most 100 characters"}},
		{"created_by NUL", func(t *models.Task) { t.CreatedBy = "discord:\x00" }, []string{"created_by: control character"}},
		{"created_by over the cap", func(t *models.Task) { t.CreatedBy = long(models.MaxActorLen + 1) }, []string{"created_by: at most 200"}},
		{"plan_source newline", func(t *models.Task) { t.PlanSource = ptr("task a\nrun 1") }, []string{"plan_source: control character"}},
		{"parent not a task id", func(t *models.Task) { t.ParentTaskID = ptr("a\x00") }, []string{"parent_task_id"}},
		{"repo not an id", func(t *models.Task) { t.RepoID = ptr("Repo One") }, []string{"repo_id"}},
		{"metadata key NUL", func(t *models.Task) { t.Metadata = map[string]string{"k\x00": "v"} },
			[]string{`metadata key "k\x00": control character U+0000`}},
		{"metadata key newline", func(t *models.Task) { t.Metadata = map[string]string{"a\nb": "v"} }, []string{"metadata key"}},
		{"metadata key empty", func(t *models.Task) { t.Metadata = map[string]string{"": "v"} }, []string{"metadata: a key must not be empty"}},
		{"metadata key over the cap", func(t *models.Task) { t.Metadata = map[string]string{long(101): "v"} }, []string{"at most 100 characters"}},
		{"metadata value NUL", func(t *models.Task) { t.Metadata = map[string]string{"file": "a\x00"} },
			[]string{`metadata["file"]: control character U+0000`}},
		{"metadata value lines", func(t *models.Task) { t.Metadata = map[string]string{"item": "a\nb"} }, nil},
		{"metadata value over the cap", func(t *models.Task) { t.Metadata = map[string]string{"k": long(models.MaxMetadataLen + 1)} },
			[]string{`metadata["k"]: at most 4096 characters`}},
		{"too much metadata", func(t *models.Task) {
			t.Metadata = map[string]string{}
			for i := range models.MaxMetadataEntries + 1 {
				t.Metadata[strings.Repeat("k", i+1)] = "v"
			}
		}, []string{"metadata: at most 64 entries"}},
		{"criterion DEL", func(t *models.Task) { t.AcceptanceCriteria = []string{"ok", "x\x7f"} },
			[]string{"acceptance_criteria[1]: control character U+007F"}},
		{"criterion over the cap", func(t *models.Task) { t.AcceptanceCriteria = []string{long(models.MaxCriterionLen + 1)} },
			[]string{"acceptance_criteria[0]: at most 4096"}},
		{"test command script", func(t *models.Task) { t.TestCommands = []string{"set -e\n\tgo vet ./...\ngo test ./..."} }, nil},
		{"test command NUL", func(t *models.Task) { t.TestCommands = []string{"go test\x00"} }, []string{"test_commands[0]: control character"}},
		{"test command over the cap", func(t *models.Task) { t.TestCommands = []string{long(models.MaxTestCommandLen + 1)} },
			[]string{"test_commands[0]: at most 10000"}},
		{"too many test commands", func(t *models.Task) { t.TestCommands = make([]string, models.MaxListEntries+1) },
			[]string{"test_commands: at most 100 entries"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := validTask()
			tc.mutate(&task)
			wantInvalid(t, task.Validate(), tc.want...)
		})
	}
}

func TestTaskPatchRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		patch models.TaskPatch
		want  string
	}{
		{"title", models.TaskPatch{Title: ptr("new\x00")}, "title: control character U+0000"},
		{"description", models.TaskPatch{Description: ptr("\x1b")}, "description: control character U+001B"},
		{"criteria", models.TaskPatch{AcceptanceCriteria: &[]string{"\x00"}}, "acceptance_criteria[0]"},
		{"test commands", models.TaskPatch{TestCommands: &[]string{"make\x00"}}, "test_commands[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.patch.Apply(validTask())
			wantInvalid(t, err, tc.want)
		})
	}
}

func TestTaskBatchValidate(t *testing.T) {
	t.Parallel()
	entry := func(mutate func(*models.BatchTask)) models.TaskBatch {
		bt := models.BatchTask{LocalID: "a", Title: "Do it"}
		mutate(&bt)
		return models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{LocalID: "first", Title: "First"}, bt}}
	}
	tests := []struct {
		name  string
		batch models.TaskBatch
		want  []string
	}{
		{"valid", entry(func(*models.BatchTask) {}), nil},
		{"name instead of title", entry(func(bt *models.BatchTask) { bt.Title, bt.Name = "", "Do it" }), nil},
		{"name equal to title", entry(func(bt *models.BatchTask) { bt.Name = "Do it" }), nil},
		{"name and title differ", entry(func(bt *models.BatchTask) { bt.Name = "Do that" }),
			[]string{`tasks[1] (a): name and title: both given and different (name "Do that", title "Do it"): give one`}},
		{"neither name nor title", entry(func(bt *models.BatchTask) { bt.Title = "" }), []string{"tasks[1] (a): title: required"}},
		{"a timeout shorter than a second", entry(func(bt *models.BatchTask) { bt.Timeout = models.Duration(time.Nanosecond) }),
			[]string{"tasks[1] (a): timeout: must be 0 (none) or between 1s and 168h0m0s (got 1ns)"}},
		{"a timeout of a second", entry(func(bt *models.BatchTask) { bt.Timeout = models.Duration(time.Second) }), nil},
		{"valid with everything", entry(func(bt *models.BatchTask) {
			bt.Dependencies = []models.BatchDependency{{ID: "first"}, {ID: "bold-orbit"}}
			bt.DedupeStrategy = []models.DedupeStrategy{{Kind: "bug", Status: "Running|READY", Fields: []string{"file"}}}
			bt.Metadata = map[string]string{"file": "main.go"}
		}), nil},
		{"empty", models.TaskBatch{ProjectID: "web"}, []string{"tasks: the batch is empty"}},
		{"too big", models.TaskBatch{ProjectID: "web", Tasks: make([]models.BatchTask, models.MaxBatchSize+1)},
			[]string{"tasks: at most 50000 tasks per batch"}},
		{"batch project", models.TaskBatch{ProjectID: "Web\x00", Tasks: []models.BatchTask{{Title: "x"}}}, []string{"project_id"}},
		{"batch created_by", models.TaskBatch{CreatedBy: "a\nb", Tasks: []models.BatchTask{{Title: "x"}}},
			[]string{"created_by: control character"}},
		{"title NUL", entry(func(bt *models.BatchTask) { bt.Title = "x\x00" }),
			[]string{"tasks[1] (a): title: control character U+0000"}},
		{"plan subtask description", entry(func(bt *models.BatchTask) { bt.Description = "\x1b[0m"; bt.IsPlanSubtask = true }),
			[]string{"tasks[1] (a): description: control character U+001B"}},
		{"entry created_by", entry(func(bt *models.BatchTask) { bt.CreatedBy = "\x00" }), []string{"tasks[1] (a): created_by"}},
		{"entry project", entry(func(bt *models.BatchTask) { bt.ProjectID = "a b" }), []string{"tasks[1] (a): project_id"}},
		{"plan source", entry(func(bt *models.BatchTask) { bt.PlanSource = "x\ny" }), []string{"tasks[1] (a): plan_source"}},
		{"local id NUL", entry(func(bt *models.BatchTask) { bt.LocalID = "a\x00" }), []string{"tasks[1].id: control character"}},
		{"local id over the cap", entry(func(bt *models.BatchTask) { bt.LocalID = strings.Repeat("a", models.MaxLocalIDLen+1) }),
			[]string{"tasks[1].id: at most 100 characters"}},
		{"local id twice", entry(func(bt *models.BatchTask) { bt.LocalID = "first" }), []string{`id "first" is already used by tasks[0]`}},
		{"dependency id empty", entry(func(bt *models.BatchTask) { bt.Dependencies = []models.BatchDependency{{ID: " "}} }),
			[]string{"tasks[1] (a): dependencies[0]: id: required"}},
		{"dependency id NUL", entry(func(bt *models.BatchTask) { bt.Dependencies = []models.BatchDependency{{ID: "x\x00"}} }),
			[]string{"dependencies[0].id: control character"}},
		{"too many dependencies", entry(func(bt *models.BatchTask) {
			bt.Dependencies = make([]models.BatchDependency, models.MaxDependencies+1)
		}), []string{"tasks[1] (a): dependencies: at most 1000"}},
		{"dedupe kind", entry(func(bt *models.BatchTask) { bt.DedupeStrategy = []models.DedupeStrategy{{Kind: "a\tb"}} }),
			[]string{"dedupe_strategy[0].kind: control character"}},
		{"dedupe status", entry(func(bt *models.BatchTask) { bt.DedupeStrategy = []models.DedupeStrategy{{Status: "Sleeping"}} }),
			[]string{"dedupe_strategy[0]: status \"Sleeping\""}},
		{"dedupe field", entry(func(bt *models.BatchTask) { bt.DedupeStrategy = []models.DedupeStrategy{{Fields: []string{"f\x00"}}} }),
			[]string{"dedupe_strategy[0].fields[0]: control character"}},
		{"too many strategies", entry(func(bt *models.BatchTask) {
			bt.DedupeStrategy = make([]models.DedupeStrategy, models.MaxDedupeStrategies+1)
		}), []string{"dedupe_strategy: at most 20"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantInvalid(t, tc.batch.Validate(), tc.want...)
		})
	}
}

func TestProjectTextFieldsAndChannel(t *testing.T) {
	t.Parallel()
	clone := func(url string) *models.RepoConfig { return &models.RepoConfig{SourceType: models.RepoClone, URL: url} }
	tests := []struct {
		name string
		p    models.Project
		want []string
	}{
		{"snowflake channel", models.Project{ID: "web", DiscordChannelID: ptr("300000000000000002")}, nil},
		{"one-digit channel", models.Project{ID: "web", DiscordChannelID: ptr("7")}, nil},
		{"largest channel", models.Project{ID: "web", DiscordChannelID: ptr("18446744073709551615")}, nil},
		{"channel name", models.Project{ID: "web", DiscordChannelID: ptr("general")}, []string{`discord_channel_id: "general" is not a Discord channel id`}},
		{"channel with a sign", models.Project{ID: "web", DiscordChannelID: ptr("-3")}, []string{"discord_channel_id"}},
		{"channel with a space", models.Project{ID: "web", DiscordChannelID: ptr(" 300000000000000002")}, []string{"discord_channel_id"}},
		{"channel of 21 digits", models.Project{ID: "web", DiscordChannelID: ptr("100000000000000000000")}, []string{"discord_channel_id"}},
		{"channel over 64 bits", models.Project{ID: "web", DiscordChannelID: ptr("18446744073709551616")}, []string{"discord_channel_id"}},
		{"empty channel", models.Project{ID: "web", DiscordChannelID: ptr("")}, []string{"discord_channel_id"}},
		{"name NUL", models.Project{ID: "web", Name: "Web\x00"}, []string{"name: control character U+0000"}},
		{"name newline", models.Project{ID: "web", Name: "Web\nApp"}, []string{"name: control character U+000A"}},
		{"name at the cap", models.Project{ID: "web", Name: strings.Repeat("é", models.MaxNameLen)}, nil},
		{"name over the cap", models.Project{ID: "web", Name: strings.Repeat("é", models.MaxNameLen+1)}, []string{"name: at most 200 characters"}},
		{"blank name", models.Project{ID: "web", Name: " "}, []string{"name: required"}},
		{"repo url NUL", models.Project{ID: "web", Repo: clone("https://example.com/a.git\x00")}, []string{"repo.url: control character"}},
		{"repo url over the cap", models.Project{ID: "web", Repo: clone("https://example.com/" + strings.Repeat("a", models.MaxURLLen))},
			[]string{"repo.url: at most 2048"}},
		{"source path newline", models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoLink, SourcePath: "/src/a\nb"}},
			[]string{"repo.source_path: control character"}},
		{"checkout base NUL", models.Project{ID: "web", Repo: &models.RepoConfig{SourceType: models.RepoInit, CheckoutBasePath: "/w\x00"}},
			[]string{"repo.checkout_base_path: control character"}},
		{"reviewer NUL", models.Project{ID: "web", Settings: models.ProjectSettings{PRReviewers: []string{"al\x00"}}},
			[]string{"settings.pr_reviewers[0]: control character"}},
		{"label in characters", models.Project{ID: "web", Settings: models.ProjectSettings{PRLabels: []string{strings.Repeat("é", 50)}}}, nil},
		{"label over the cap", models.Project{ID: "web", Settings: models.ProjectSettings{PRLabels: []string{strings.Repeat("é", 51)}}},
			[]string{"settings.pr_labels[0]: at most 50 characters"}},
		{"too many labels", models.Project{ID: "web", Settings: models.ProjectSettings{PRLabels: make([]string, 21)}},
			[]string{"settings.pr_labels: at most 20 entries"}},
		{"hook command tab", models.Project{ID: "web", Settings: models.ProjectSettings{HookCommands: []string{"make\ttest"}}},
			[]string{"settings.hook_commands[0]: control character U+0009"}},
		{"hook command over the cap", models.Project{ID: "web", Settings: models.ProjectSettings{
			HookCommands: []string{"make " + strings.Repeat("a", models.MaxCommandLen)}}}, []string{"settings.hook_commands[0]: at most 4096"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := tc.p
			p.ApplyDefaults()
			wantInvalid(t, p.Validate(), tc.want...)
		})
	}
}

func TestProjectPatch(t *testing.T) {
	t.Parallel()
	base := models.Project{ID: "web", DiscordChannelID: ptr("300000000000000002")}
	base.ApplyDefaults()
	tests := []struct {
		name   string
		patch  models.ProjectPatch
		fields []string
		want   []string
	}{
		{"empty", models.ProjectPatch{}, nil, []string{"nothing to change: set one of name, credit_weight"}},
		{"name", models.ProjectPatch{Name: ptr("Web")}, []string{"name"}, nil},
		{"clear the channel", models.ProjectPatch{DiscordChannelID: ptr("")}, []string{"discord_channel_id"}, nil},
		{"channel name", models.ProjectPatch{DiscordChannelID: ptr("#general")}, []string{"discord_channel_id"},
			[]string{"discord_channel_id:", "not a Discord channel id"}},
		{"name NUL", models.ProjectPatch{Name: ptr("a\x00")}, []string{"name"}, []string{"name: control character"}},
		{"empty settings are a change", models.ProjectPatch{Settings: &models.ProjectSettings{}}, []string{"settings"}, nil},
		{"every field", models.ProjectPatch{Name: ptr("W"), CreditWeight: ptr(2.0), MaxConcurrentAgents: ptr(3),
			Status: ptr(models.ProjectPaused), BudgetLimit: ptr[int64](5), DiscordChannelID: ptr("1"),
			Repo: &models.RepoConfig{SourceType: models.RepoInit}, Settings: &models.ProjectSettings{}},
			[]string{"name", "credit_weight", "max_concurrent_agents", "status", "budget_limit", "discord_channel_id", "repo", "settings"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.patch.Fields(); strings.Join(got, ",") != strings.Join(tc.fields, ",") {
				t.Errorf("Fields() = %v, want %v", got, tc.fields)
			}
			_, err := tc.patch.Apply(base)
			wantInvalid(t, err, tc.want...)
		})
	}
}

func TestAgentTextFields(t *testing.T) {
	t.Parallel()
	reg := func(mutate func(*models.AgentRegistration)) models.Agent {
		r := models.AgentRegistration{ID: "a1", AgentType: "command", AgentSettings: models.AgentSettings{Command: "/bin/agent"}}
		mutate(&r)
		return r.Agent()
	}
	tests := []struct {
		name string
		a    models.Agent
		want []string
	}{
		{"valid", reg(func(r *models.AgentRegistration) {
			r.Args = []string{"--prompt", "two\nlines"}
			r.Env = map[string]string{"CERT": "-----BEGIN-----\nabc\n-----END-----"}
		}), nil},
		{"name NUL", reg(func(r *models.AgentRegistration) { r.Name = "a\x00" }), []string{"name: control character"}},
		{"name over the cap", reg(func(r *models.AgentRegistration) { r.Name = strings.Repeat("é", 201) }), []string{"name: at most 200"}},
		{"command NUL", reg(func(r *models.AgentRegistration) { r.Command = "/bin/agent\x00" }), []string{"command: control character"}},
		{"command newline", reg(func(r *models.AgentRegistration) { r.Command = "/bin/a\nb" }), []string{"command: control character"}},
		{"arg NUL", reg(func(r *models.AgentRegistration) { r.Args = []string{"ok", "x\x00"} }), []string{"args[1]: control character"}},
		{"arg over the cap", reg(func(r *models.AgentRegistration) { r.Args = []string{strings.Repeat("a", models.MaxCommandLen+1)} }),
			[]string{"args[0]: at most 4096"}},
		{"too many args", reg(func(r *models.AgentRegistration) { r.Args = make([]string, 101) }), []string{"args: at most 100 entries"}},
		{"env name newline", reg(func(r *models.AgentRegistration) { r.Env = map[string]string{"A\nB": "v"} }), []string{"env name", "control character"}},
		{"env name with =", reg(func(r *models.AgentRegistration) { r.Env = map[string]string{"A=B": "v"} }), []string{"not a variable name"}},
		{"env value NUL", reg(func(r *models.AgentRegistration) { r.Env = map[string]string{"TOKEN": "se\x00cret"} }),
			[]string{"env.TOKEN: control character U+0000"}},
		{"too many variables", reg(func(r *models.AgentRegistration) {
			r.Env = map[string]string{}
			for i := range models.MaxEnvEntries + 1 {
				r.Env[strings.Repeat("V", i+1)] = "1"
			}
		}), []string{"env: at most 100 variables"}},
		{"project NUL", reg(func(r *models.AgentRegistration) { r.Projects = []string{"web\x00"} }), []string{"projects[0]"}},
		{"profile model newline", reg(func(r *models.AgentRegistration) { r.Profile.Model = "a\nb" }), []string{"profile.model: control character"}},
		{"profile tool NUL", reg(func(r *models.AgentRegistration) { r.Profile.AllowedTools = []string{"Bash\x00"} }),
			[]string{"profile.allowed_tools[0]: control character"}},
		{"profile suffix ESC", reg(func(r *models.AgentRegistration) { r.Profile.SystemPromptSuffix = "\x1b" }),
			[]string{"profile.system_prompt_suffix: control character"}},
		{"mcp command NUL", reg(func(r *models.AgentRegistration) {
			r.Profile.MCPServers = []models.MCPServer{{Name: "gh", Command: "gh-mcp\x00"}}
		}), []string{"profile.mcp_servers[0].command: control character"}},
		{"mcp env value NUL", reg(func(r *models.AgentRegistration) {
			r.Profile.MCPServers = []models.MCPServer{{Name: "gh", Command: "gh-mcp", Env: map[string]string{"K": "\x00"}}}
		}), []string{"profile.mcp_servers[0].env.K: control character"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := tc.a
			wantInvalid(t, a.Validate(), tc.want...)
		})
	}
}

func TestHookTextFields(t *testing.T) {
	t.Parallel()
	hook := func(mutate func(*models.Hook)) models.Hook {
		h := models.HookSpec{ProjectID: "web", Name: "Triage", Trigger: models.HookTrigger{Type: models.TriggerManual},
			PromptTemplate: "Look"}.Hook()
		mutate(&h)
		return h
	}
	const key = "sk-secret\x00key"
	tests := []struct {
		name string
		h    models.Hook
		want []string
	}{
		{"valid", hook(func(*models.Hook) {}), nil},
		{"template lines", hook(func(h *models.Hook) { h.PromptTemplate = "Look:\n\t{{event.title}}" }), nil},
		{"name NUL", hook(func(h *models.Hook) { h.Name = "Tri\x00age" }), []string{"name: control character U+0000"}},
		{"name at the cap", hook(func(h *models.Hook) { h.Name = strings.Repeat("é", models.MaxNameLen) }), nil},
		{"name over the cap", hook(func(h *models.Hook) { h.Name = strings.Repeat("é", models.MaxNameLen+1) }), []string{"name: at most 200"}},
		{"template ESC", hook(func(h *models.Hook) { h.PromptTemplate = "\x1b[2J" }), []string{"prompt_template: control character U+001B"}},
		{"template at the cap in characters", hook(func(h *models.Hook) { h.PromptTemplate = strings.Repeat("é", models.MaxHookTemplate) }), nil},
		{"template over the cap", hook(func(h *models.Hook) { h.PromptTemplate = strings.Repeat("é", models.MaxHookTemplate+1) }),
			[]string{"prompt_template: at most 65536 characters"}},
		{"cron expression newline", hook(func(h *models.Hook) { h.Trigger = models.HookTrigger{Type: models.TriggerCron, Expr: "@daily\n"} }),
			[]string{"trigger.expr: control character"}},
		{"filter value NUL", hook(func(h *models.Hook) {
			h.Trigger = models.HookTrigger{Type: models.TriggerEvent, EventType: "task.failed", Filters: map[string]string{"kind": "b\x00"}}
		}), []string{`trigger.filters["kind"]: control character`}},
		{"step path NUL", hook(func(h *models.Hook) { h.ContextSteps = []models.HookStep{{Type: models.StepReadFile, Path: "a\x00"}} }),
			[]string{"context_steps[0].path: control character"}},
		{"step command newline", hook(func(h *models.Hook) {
			h.ContextSteps = []models.HookStep{{Type: models.StepRunCommand, Command: "make\nrm -rf /"}}
		}), []string{"context_steps[0].command: control character U+000A"}},
		{"step url over the cap", hook(func(h *models.Hook) {
			h.ContextSteps = []models.HookStep{{Type: models.StepHTTPGet, URL: "https://example.com/" + strings.Repeat("a", models.MaxURLLen)}}
		}), []string{"context_steps[0].url: at most 2048"}},
		{"llm model NUL", hook(func(h *models.Hook) { h.LLMConfig = &models.HookLLMConfig{Model: "gpt\x00"} }),
			[]string{"llm_config.model: control character"}},
		{"llm key NUL", hook(func(h *models.Hook) { h.LLMConfig = &models.HookLLMConfig{BaseURL: "https://llm.example", APIKey: key} }),
			[]string{"llm_config.api_key: control character"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := tc.h
			err := h.Validate()
			wantInvalid(t, err, tc.want...)
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Fatalf("the message shows the key: %v", err)
			}
		})
	}
}

func TestTransitionRequestAndFeedback(t *testing.T) {
	t.Parallel()
	req := func(mutate func(*models.TransitionRequest)) models.TransitionRequest {
		r := models.TransitionRequest{TaskID: "bold-orbit", Event: models.EventAdminStop, Reason: "wrong branch", Actor: "api"}
		mutate(&r)
		return r
	}
	tests := []struct {
		name string
		r    models.TransitionRequest
		want []string
	}{
		{"valid", req(func(*models.TransitionRequest) {}), nil},
		{"no reason", req(func(r *models.TransitionRequest) { r.Reason = "" }), nil},
		{"reason NUL", req(func(r *models.TransitionRequest) { r.Reason = "stop\x00" }), []string{"reason: control character U+0000"}},
		{"reason newline", req(func(r *models.TransitionRequest) { r.Reason = "a\nb" }), []string{"reason: control character U+000A"}},
		{"reason at the cap", req(func(r *models.TransitionRequest) { r.Reason = strings.Repeat("é", models.MaxReasonLen) }), nil},
		{"reason over the cap", req(func(r *models.TransitionRequest) { r.Reason = strings.Repeat("é", models.MaxReasonLen+1) }),
			[]string{"reason: at most 1000 characters"}},
		{"actor tab", req(func(r *models.TransitionRequest) { r.Actor = "a\tb" }), []string{"actor: control character U+0009"}},
		{"actor over the cap", req(func(r *models.TransitionRequest) { r.Actor = strings.Repeat("a", models.MaxActorLen+1) }),
			[]string{"actor: at most 200 characters"}},
		{"task id", req(func(r *models.TransitionRequest) { r.TaskID = "Bold Orbit" }), []string{"task_id"}},
		{"event", req(func(r *models.TransitionRequest) { r.Event = "FINISH" }), []string{"event: unknown task event"}},
		{"expect from", req(func(r *models.TransitionRequest) { r.ExpectFrom = "DONE" }), []string{"expect_from"}},
		{"feedback", req(func(r *models.TransitionRequest) {
			r.Feedback = &models.Feedback{Source: "api", Verdict: models.VerdictReject, Text: "no\x00"}
		}), []string{"feedback: control character"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantInvalid(t, tc.r.Validate(), tc.want...)
		})
	}

	for _, tc := range []struct {
		name string
		f    models.Feedback
		want []string
	}{
		{"comment", models.Feedback{Source: "hook:triage", Verdict: models.VerdictComment, Text: "Mind:\n\t- the flaky test"}, nil},
		{"approve without a note", models.Feedback{Source: "discord:1", Verdict: models.VerdictApprove}, nil},
		{"reject without text", models.Feedback{Source: "api", Verdict: models.VerdictReject, Text: " "}, []string{"feedback: required"}},
		{"text ESC", models.Feedback{Source: "api", Verdict: models.VerdictComment, Text: "\x1b[1m"}, []string{"feedback: control character U+001B"}},
		{"text over the cap", models.Feedback{Source: "api", Verdict: models.VerdictComment, Text: strings.Repeat("é", models.MaxDescriptionLen+1)},
			[]string{"feedback: at most 200000"}},
		{"source newline", models.Feedback{Source: "a\nb", Verdict: models.VerdictComment, Text: "x"}, []string{"source: control character"}},
		{"verdict", models.Feedback{Source: "a", Verdict: "maybe", Text: "x"}, []string{"verdict: must be approve, reject or comment"}},
	} {
		t.Run("feedback "+tc.name, func(t *testing.T) {
			t.Parallel()
			wantInvalid(t, tc.f.Validate(), tc.want...)
		})
	}
}

func TestAgentReportsAndQuestions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want []string
	}{
		{"question", models.ValidateQuestionText("question", "Which DB?\n\tPostgres or SQLite?"), nil},
		{"question NUL", models.ValidateQuestionText("question", "Which\x00"), []string{"question: control character U+0000"}},
		{"answer ESC", models.ValidateQuestionText("answer", "\x1b[31mno"), []string{"answer: control character U+001B"}},
		{"answer invalid UTF-8", models.ValidateQuestionText("answer", "ok\xff"), []string{"answer: not valid UTF-8"}},
		{"answer at the cap in characters", models.ValidateQuestionText("answer", strings.Repeat("é", models.MaxMessageLen)), nil},
		{"answer over the cap", models.ValidateQuestionText("answer", strings.Repeat("é", models.MaxMessageLen+1)),
			[]string{"answer: at most 16000 characters"}},
		{"summary NUL", (&models.Completion{Summary: "done\x00"}).Validate(), []string{"summary: control character"}},
		{"summary lines", (&models.Completion{Summary: "done:\n\t- a", FilesChanged: []string{"a.go"}}).Validate(), nil},
		{"file NUL", (&models.Completion{Summary: "done", FilesChanged: []string{"a\x00.go"}}).Validate(),
			[]string{"files_changed[0]: control character"}},
		{"too many files", (&models.Completion{Summary: "done", FilesChanged: make([]string, models.MaxFilesChanged+1)}).Validate(),
			[]string{"files_changed: at most 10000 entries"}},
		{"rate limit message ESC", (&models.RateLimit{Message: "\x1b"}).Validate(), []string{"message: control character"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantInvalid(t, tc.err, tc.want...)
		})
	}
}

func TestRuleTextFields(t *testing.T) {
	t.Parallel()
	rule := func(mutate func(*models.Rule)) models.Rule {
		r := models.Rule{ID: "one-deploy", Type: models.RuleConcurrency, Matcher: models.RuleMatcher{Kind: "deploy"}, MaxConcurrency: 1}
		mutate(&r)
		return r
	}
	for _, tc := range []struct {
		name string
		r    models.Rule
		want []string
	}{
		{"valid", rule(func(*models.Rule) {}), nil},
		{"id NUL", rule(func(r *models.Rule) { r.ID = "a\x00" }), []string{"id: control character"}},
		{"id over the cap", rule(func(r *models.Rule) { r.ID = strings.Repeat("é", models.MaxRuleIDLen+1) }), []string{"id: at most 100 characters"}},
		{"kind newline", rule(func(r *models.Rule) { r.Matcher.Kind = "a\nb" }), []string{"matcher.kind: control character"}},
		{"field NUL", rule(func(r *models.Rule) { r.Matcher.Fields = []string{"f\x00"} }), []string{"matcher.fields[0]: control character"}},
		{"empty field", rule(func(r *models.Rule) { r.Matcher.Fields = []string{""} }), []string{"matcher.fields[0]: metadata keys are 1-100"}},
		{"status NUL", rule(func(r *models.Rule) { r.Matcher.Status = "Running\x00" }), []string{"matcher.status: control character"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.r
			wantInvalid(t, r.Validate(), tc.want...)
		})
	}
}

func TestValidSnowflake(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"1": true, "300000000000000001": true, "18446744073709551615": true,
		"": false, "18446744073709551616": false, "99999999999999999999": false, "012a": false, "1 ": false, "١٢٣": false,
	} {
		if got := models.ValidSnowflake(s); got != want {
			t.Errorf("ValidSnowflake(%q) = %v, want %v", s, got, want)
		}
	}
}
