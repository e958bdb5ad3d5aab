package store_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func mustHook(t *testing.T, s interface {
	CreateHook(context.Context, models.Hook) (models.Hook, error)
}, spec string) models.Hook {
	t.Helper()
	var hs models.HookSpec
	if err := json.Unmarshal([]byte(spec), &hs); err != nil {
		t.Fatal(err)
	}
	h, err := s.CreateHook(context.Background(), hs.Hook())
	if err != nil {
		t.Fatalf("create hook: %v", err)
	}
	return h
}

func TestHookCRUD(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock := openClocked(t)
	storetest.Project(t, s, "web")
	storetest.Project(t, s, "api")
	temp := float32(0.5)
	h := mustHook(t, s, `{"project_id":"web","name":"Nightly Digest!","trigger":{"type":"cron","expr":"0 2 * * *",
		"timezone":"Europe/Paris"},"context_steps":[{"type":"read_file","path":"README.md"}],
		"prompt_template":"{{step_0}}","llm_config":{"model":"m","api_key":"k","temperature":0.5},"max_tokens_per_run":500}`)
	if h.ID != "nightly-digest" || !h.Enabled || h.CooldownSeconds != models.DefaultHookCooldown ||
		!h.ScheduleFrom.Equal(clock.Now()) || h.LLMConfig.APIKey != "k" || *h.LLMConfig.Temperature != temp ||
		*h.MaxTokensPerRun != 500 || h.ContextSteps[0].Path != "README.md" {
		t.Fatalf("created %+v", h)
	}
	mustHook(t, s, `{"project_id":"api","name":"Other","trigger":{"type":"manual"}}`)
	for _, c := range []struct {
		spec string
		code models.ErrorCode
		msg  string
	}{
		{`{"project_id":"web","name":"Nightly digest","trigger":{"type":"manual"}}`, models.CodeConflict, `hook "nightly-digest" exists already`},
		{`{"project_id":"nope","name":"X","trigger":{"type":"manual"}}`, models.CodeNotFound, `project "nope" not found`},
		{`{"project_id":"web","name":"","trigger":{"type":"manual"}}`, models.CodeInvalid, "name: required"},
		{`{"project_id":"web","name":"!!!","trigger":{"type":"manual"}}`, models.CodeInvalid, `id: the name "!!!" has no letter or digit`},
		{`{"project_id":"web","name":"X","trigger":{"type":"manual"},"cooldown_seconds":-1}`, models.CodeInvalid, "cooldown_seconds: must be between 0 and 31622400"},
	} {
		var hs models.HookSpec
		if err := json.Unmarshal([]byte(c.spec), &hs); err != nil {
			t.Fatal(err)
		}
		_, err := s.CreateHook(ctx, hs.Hook())
		if models.ErrorCodeOf(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v", c.spec, err)
		}
	}
	if hs, err := s.ListHooks(ctx, "web"); err != nil || len(hs) != 1 || hs[0].ID != h.ID {
		t.Fatalf("list web: %+v %v", hs, err)
	}
	if hs, _ := s.ListHooks(ctx, ""); len(hs) != 2 || hs[0].ProjectID != "api" {
		t.Fatalf("list all: %+v", hs)
	}

	// A patch that leaves the hook invalid changes nothing.
	bad := "{{step_3}}"
	if _, err := s.UpdateHook(ctx, h.ID, models.HookPatch{PromptTemplate: &bad}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("invalid patch: %v", err)
	}
	if got, _ := s.GetHook(ctx, h.ID); got.PromptTemplate != "{{step_0}}" {
		t.Fatalf("an invalid patch changed the hook: %q", got.PromptTemplate)
	}
	// A changed trigger restarts the schedule; a redacted key sent back
	// keeps the stored one.
	clock.Advance(time.Hour)
	off, name := false, "Nightly"
	trig := models.HookTrigger{Type: models.TriggerPeriodic, IntervalSeconds: 600}
	got, err := s.UpdateHook(ctx, h.ID, models.HookPatch{Name: &name, Enabled: &off, Trigger: &trig,
		LLMConfig: &models.HookLLMConfig{Model: "n", APIKey: "[redacted]"}, ClearMaxTokens: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Nightly" || got.Enabled || got.Trigger.IntervalSeconds != 600 || !got.ScheduleFrom.Equal(clock.Now()) ||
		got.LLMConfig.APIKey != "k" || got.LLMConfig.Model != "n" || got.MaxTokensPerRun != nil || !got.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("updated %+v", got)
	}
	if _, err := s.UpdateHook(ctx, "nope", models.HookPatch{Name: &name}); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("update of a missing hook: %v", err)
	}

	// Deleting a hook deletes its runs; the ledger keeps their tokens.
	res, err := s.ClaimHookRun(ctx, models.HookClaim{HookID: h.ID, FireKey: "manual:1", TriggerReason: "t", Manual: true})
	if err != nil || res.Run.ID != "nightly-digest.1" || res.Run.Status != models.HookRunRunning {
		t.Fatalf("claim: %+v %v", res, err)
	}
	if err := s.RecordHookUsage(ctx, res.Run, models.TokenUsage{Input: 40, Output: 2}); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.GetHookRun(ctx, res.Run.ID); r.TokensUsed != 42 {
		t.Fatalf("run tokens %d", r.TokensUsed)
	}
	if err := s.DeleteHook(ctx, h.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetHookRun(ctx, res.Run.ID); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("run after delete: %v", err)
	}
	if done, err := s.FinishHookRun(ctx, models.HookRun{ID: res.Run.ID, Status: models.HookRunCompleted}); err != nil || done {
		t.Fatalf("finishing a deleted hook's run: %v %v", done, err)
	}
	if n, _ := s.TokensUsedSince(ctx, "web", clock.Now().Add(-time.Hour)); n != 42 {
		t.Fatalf("ledger after delete: %d", n)
	}
	if err := s.DeleteHook(ctx, h.ID); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("second delete: %v", err)
	}
	// A hook created again under the same id numbers its runs anew.
	mustHook(t, s, `{"project_id":"web","name":"Nightly digest","trigger":{"type":"manual"}}`)
	if res, _ := s.ClaimHookRun(ctx, models.HookClaim{HookID: h.ID, FireKey: "manual:1", Manual: true}); res.Run.ID != "nightly-digest.1" {
		t.Fatalf("run id %q", res.Run.ID)
	}
}

func TestClaimHookRunRecordsEachFiringOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, clock := openClocked(t)
	storetest.Project(t, s, "web")
	h := mustHook(t, s, `{"project_id":"web","name":"H","trigger":{"type":"periodic","interval_seconds":60},"cooldown_seconds":600}`)
	at := clock.Now().Add(time.Minute)
	claim := models.HookClaim{HookID: h.ID, FireKey: "schedule:a", ScheduledAt: &at, TriggerReason: "schedule", MaxRunning: 1}
	first, err := s.ClaimHookRun(ctx, claim)
	if err != nil || first.Run.Status != models.HookRunRunning || !first.Run.ScheduledAt.Equal(at) {
		t.Fatalf("first claim %+v %v", first, err)
	}
	if again, _ := s.ClaimHookRun(ctx, claim); !again.Duplicate || again.Run.ID != "" {
		t.Fatalf("the same key again: %+v", again)
	}
	// The cap: another hook's firing waits, unrecorded.
	other := mustHook(t, s, `{"project_id":"web","name":"Other","trigger":{"type":"manual"}}`)
	if busy, _ := s.ClaimHookRun(ctx, models.HookClaim{HookID: other.ID, FireKey: "manual:x", MaxRunning: 1}); !busy.Busy {
		t.Fatalf("at the cap: %+v", busy)
	}
	if last, _ := s.LastScheduledFirings(ctx); len(last) != 1 || !last[h.ID].Equal(at) {
		t.Fatalf("last firings %v", last)
	}
	// In the cooldown: recorded as skipped (a skipped firing is never busy).
	if _, err := s.FinishHookRun(ctx, models.HookRun{ID: first.Run.ID, Status: models.HookRunCompleted}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	skipped, err := s.ClaimHookRun(ctx, models.HookClaim{HookID: h.ID, FireKey: "schedule:b", MaxRunning: 1})
	if err != nil || skipped.Run.Status != models.HookRunSkipped || !strings.HasPrefix(*skipped.Run.SkippedReason, "cooldown:") ||
		skipped.Run.CompletedAt == nil {
		t.Fatalf("in the cooldown: %+v %v", skipped, err)
	}
	// The cooldown counts from the last run that was not skipped.
	clock.Advance(9 * time.Minute)
	if r, _ := s.ClaimHookRun(ctx, models.HookClaim{HookID: h.ID, FireKey: "schedule:c"}); r.Run.Status != models.HookRunRunning {
		t.Fatalf("after the cooldown: %+v", r.Run)
	}
	if n, err := s.FailRunningHookRuns(ctx); err != nil || n != 1 {
		t.Fatalf("closed %d, %v", n, err)
	}
	runs, _ := s.ListHookRuns(ctx, models.HookRunFilter{HookID: h.ID})
	if len(runs) != 3 || runs[0].Status != models.HookRunFailed || runs[0].Error != "the daemon stopped during the run" {
		t.Fatalf("runs %+v", runs)
	}
	if rs, _ := s.ListHookRuns(ctx, models.HookRunFilter{HookID: h.ID, Status: models.HookRunSkipped}); len(rs) != 1 {
		t.Fatalf("skipped runs %d", len(rs))
	}
}

func TestTaskEventsAfterReadsTheOutboxInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openClocked(t)
	storetest.Project(t, s, "web")
	if _, err := s.RegisterAgent(ctx, models.Agent{ID: "a1", Name: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "true"}}); err != nil {
		t.Fatal(err)
	}
	res, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: "Before"}}})
	if err != nil {
		t.Fatal(err)
	}
	apply := func(id string, evs ...models.TaskEvent) {
		for _, ev := range evs {
			if _, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: ev, AgentID: "a1", Actor: "t"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	apply(res[0].TaskID, models.EventAssigned, models.EventAgentStarted)
	// A new consumer starts after what exists.
	cur, err := s.EventCursor(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if evs, last, _ := s.TaskEventsAfter(ctx, cur, 100); len(evs) != 0 || last != cur {
		t.Fatalf("events before the cursor: %+v", evs)
	}
	apply(res[0].TaskID, models.EventAgentCompleted, models.EventPRCreated, models.EventPRMerged)
	if err := s.Notify(ctx, "k", models.Notice{Kind: models.NoticeTaskProgress, ProjectID: "web", TaskID: res[0].TaskID, Payload: map[string]string{"m": "x"}}); err != nil {
		t.Fatal(err)
	}
	evs, last, err := s.TaskEventsAfter(ctx, cur, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	if strings.Join(types, " ") != "task.awaiting_approval task.completed pr.merged" || last <= evs[2].ID {
		t.Fatalf("events %v, last %d", types, last)
	}
	if evs[1].ID != evs[2].ID || evs[2].Event != "PR_MERGED" || evs[2].Title != "Before" {
		t.Fatalf("pr.merged %+v", evs[2])
	}
	if err := s.SetEventCursor(ctx, "test", last); err != nil {
		t.Fatal(err)
	}
	if err := s.SetEventCursor(ctx, "test", 1); err != nil {
		t.Fatal(err)
	}
	before := s.Commits()
	if again, _ := s.EventCursor(ctx, "test"); again != last {
		t.Fatalf("the cursor moved back to %d", again)
	}
	if n := s.Commits() - before; n != 0 {
		t.Fatalf("reading an existing cursor committed %d write transactions, want 0", n)
	}
}

func TestHookQueriesAreScopedToTheProject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := openClocked(t)
	storetest.Project(t, s, "web")
	storetest.Project(t, s, "api")
	for _, p := range []string{"web", "api"} {
		if _, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: p, Tasks: []models.BatchTask{{Title: p + " one"}, {Title: p + " two", Priority: ptrInt(1)}}}); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: p, Input: 10, Output: 5}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		step  models.HookStep
		count int
		has   string
	}{
		{models.HookStep{Query: "tasks"}, 2, `"title": "web two"`},
		{models.HookStep{Query: "tasks", Status: "Finished"}, 0, "[]"},
		{models.HookStep{Query: "tasks", MaxCount: 1}, 1, `"priority": 1`},
		{models.HookStep{Query: "task_counts"}, 1, `"tasks": 2`},
		{models.HookStep{Query: "token_usage"}, 1, `"total_tokens": 15`},
		{models.HookStep{Query: "failed_tasks"}, 0, "[]"},
		{models.HookStep{Query: "recent_events"}, 2, `"to_status": "READY"`},
		{models.HookStep{Query: "recent_runs"}, 0, "[]"},
	} {
		out, n, err := s.HookQuery(ctx, "web", c.step)
		if err != nil || n != c.count || !strings.Contains(out, c.has) || strings.Contains(out, "api ") {
			t.Errorf("%+v: %d rows, %v\n%s", c.step, n, err, out)
		}
	}
	if _, _, err := s.HookQuery(ctx, "web", models.HookStep{Query: "drop"}); models.ErrorCodeOf(err) != models.CodeInvalid {
		t.Fatalf("unknown query: %v", err)
	}
}

func ptrInt(v int) *int { return &v }

// TestMigrationSplitsHookTriggerReasons opens a database whose hook runs
// kept only a sentence as their trigger_reason and checks that the
// migration writes the specification's values, the sentence kept as the
// detail.
func TestMigrationSplitsHookTriggerReasons(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	if err := store.MigrateForTest(path, 24); err != nil {
		t.Fatal(err)
	}
	err := store.ExecAtForTest(path, `
		INSERT INTO projects (id, name, credit_weight, max_concurrent_agents, status, created_at, updated_at)
			VALUES ('p', 'p', 1, 1, 'ACTIVE', 0, 0);
		INSERT INTO hooks (id, project_id, name, trigger, created_at, updated_at)
			VALUES ('every', 'p', 'every', '{"type":"periodic","interval_seconds":3600}', 0, 0),
			       ('morning', 'p', 'morning', '{"type":"cron","expr":"0 9 * * *"}', 0, 0);
		INSERT INTO hook_runs (id, hook_id, project_id, trigger_reason, status, started_at, fire_key) VALUES
			('every.1', 'every', 'p', 'schedule 2026-03-01T10:00:00Z', 'completed', 1, 'a'),
			('morning.1', 'morning', 'p', 'schedule 2026-03-02T09:00:00Z (catch-up after downtime: 2 earlier scheduled times missed)', 'completed', 2, 'b'),
			('every.2', 'every', 'p', 'event task.completed of task brave-otter', 'completed', 3, 'c'),
			('every.3', 'every', 'p', 'fired by alice', 'skipped', 4, 'd');`)
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.OpenAt(t, path)
	want := map[string][2]string{
		"every.1":   {"periodic", "schedule 2026-03-01T10:00:00Z"},
		"morning.1": {"cron", "schedule 2026-03-02T09:00:00Z (catch-up after downtime: 2 earlier scheduled times missed)"},
		"every.2":   {"event:task.completed", "event task.completed of task brave-otter"},
		"every.3":   {"manual", "fired by alice"},
	}
	for id, w := range want {
		r, err := s.GetHookRun(context.Background(), id)
		if err != nil || string(r.TriggerReason) != w[0] || r.TriggerDetail != w[1] {
			t.Errorf("%s: trigger %q, detail %q (%v); want %q, %q", id, r.TriggerReason, r.TriggerDetail, err, w[0], w[1])
		}
	}
	if r, _ := s.GetHookRun(context.Background(), "every.3"); func() bool { by, ok := r.FiredBy(); return !ok || by != "alice" }() {
		t.Errorf("every.3 is not read as fired by alice: %+v", r)
	}
}
