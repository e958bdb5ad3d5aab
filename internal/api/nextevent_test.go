package api_test

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock/clocktest"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// TestTaskJSONSaysWhatHappensNext: through the daemon's service, a FAILED
// task's JSON says when it is retried (its failure plus the configured
// backoff, doubled per earlier retry), or that it blocks when no retry is
// left, and a PAUSED task's when it resumes and why it paused; in its
// detail and in listings, and not for a task of any other status.
func TestTaskJSONSaysWhatHappensNext(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	k := servicetest.New(t, servicetest.WithStoreOptions(storetest.WithClock(clock)), servicetest.WithService(func(c *service.Config) {
		c.Clock, c.RetryBackoff, c.MaxBackoff = clock, time.Minute, 3*time.Minute
	}))
	st, svc := k.Store, k.Service
	s, err := api.New(api.Config{}, svc)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	c, err := api.NewClient(srv.URL, "", srv.Client())
	if err != nil {
		t.Fatal(err)
	}

	if _, err := c.CreateProject(ctx, models.ProjectSpec{ID: "web"}.Project()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	three, one := 3, 1
	res, err := c.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{
		{LocalID: "retries", Title: "retries left", MaxRetries: &three},
		{LocalID: "spent", Title: "no retries left", MaxRetries: &one},
		{LocalID: "paused", Title: "rate limited"},
		{LocalID: "ready", Title: "ready"}}})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, r := range res {
		ids[r.LocalID] = r.TaskID
	}
	// run claims and starts the task on a1 and ends its run with end.
	run := func(id string, end models.RunEnd) {
		t.Helper()
		r, _, err := st.ClaimTask(ctx, id, "a1")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.StartRun(ctx, r.ID, 1000, "/tmp"); err != nil {
			t.Fatal(err)
		}
		end.RunID, end.ExpectFrom = r.ID, models.StatusInProgress
		if _, err := st.FinishRun(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	fail := models.RunEnd{Event: models.EventAgentFailed, Reason: "go test failed", Outcome: "failed", Error: "go test failed"}
	retry := func(id string) {
		t.Helper()
		if _, err := st.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventRetry, Actor: "system"}); err != nil {
			t.Fatal(err)
		}
	}

	// "retries" fails twice: its second retry waits 2m after the second failure.
	run(ids["retries"], fail)
	retry(ids["retries"])
	clock.Advance(10 * time.Minute)
	run(ids["retries"], fail)
	secondFailure := clock.Now()
	// "spent" fails, is retried and fails again: its one retry is used.
	clock.Advance(time.Minute)
	run(ids["spent"], fail)
	retry(ids["spent"])
	clock.Advance(time.Minute)
	run(ids["spent"], fail)
	spentFailure := clock.Now()
	resume := clock.Now().Add(time.Hour)
	run(ids["paused"], models.RunEnd{Event: models.EventTokensExhausted, Reason: "rate limited until 2026-03-01T13:12:00Z",
		ResumeAfter: &resume, Outcome: "rate_limited"})

	want := map[string]struct {
		event  models.TaskEvent
		at     time.Time
		reason string
	}{
		"retries": {models.EventRetry, secondFailure.Add(2 * time.Minute),
			"retry 2 of 3 at 2026-03-01T12:12:00Z (backoff 2m0s after the failure)"},
		"spent": {models.EventMaxRetries, spentFailure, "blocks at 2026-03-01T12:12:00Z: no retries left (1 of 1 used)"},
		"paused": {models.EventResumeTimer, resume,
			"resumes at 2026-03-01T13:12:00Z: rate limited until 2026-03-01T13:12:00Z"},
		"ready": {},
	}
	check := func(where string, task models.Task) {
		t.Helper()
		var w struct {
			event  models.TaskEvent
			at     time.Time
			reason string
		}
		for local, id := range ids {
			if id == task.ID {
				w = want[local]
			}
		}
		var at time.Time
		if task.NextEventAt != nil {
			at = *task.NextEventAt
		}
		if task.NextEvent != w.event || !at.Equal(w.at) || task.NextEventReason != w.reason {
			t.Errorf("%s: %s (%s): next %q at %s: %q; want %q at %s: %q", where, task.ID, task.Status,
				task.NextEvent, at, task.NextEventReason, w.event, w.at, w.reason)
		}
	}
	for _, id := range ids {
		d, err := c.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		check("detail", d.Task)
	}
	ts, err := c.ListTasks(ctx, models.TaskFilter{ProjectID: "web"})
	if err != nil || len(ts) != 4 {
		t.Fatalf("listing: %d tasks, %v", len(ts), err)
	}
	for _, task := range ts {
		check("listing", task)
	}

	// The JSON's names and format, as a script reads them.
	resp, err := srv.Client().Get(srv.URL + "/api/v1/tasks/" + ids["retries"])
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw strings.Builder
	if _, err := io.Copy(&raw, resp.Body); err != nil {
		t.Fatal(err)
	}
	for _, field := range []string{`"next_event":"RETRY"`, `"next_event_at":"2026-03-01T12:12:00Z"`,
		`"next_event_reason":"retry 2 of 3 at 2026-03-01T12:12:00Z (backoff 2m0s after the failure)"`} {
		if !strings.Contains(raw.String(), field) {
			t.Errorf("task JSON lacks %s: %s", field, raw.String())
		}
	}
}
