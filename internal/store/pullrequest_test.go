package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestPullRequests(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	ctx := context.Background()
	storetest.Project(t, s, "web")
	res, err := s.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: "a"}, {Title: "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := res[0].TaskID, res[1].TaskID
	now := time.Now()
	pr, err := s.SavePullRequest(ctx, models.PullRequest{TaskID: a, Owner: "o", Repo: "r", Number: 7, URL: "https://h/o/r/pull/7",
		Branch: "aq/x", NextCheckAt: now.Add(-time.Second)})
	if err != nil || pr.ProjectID != "web" || pr.State != models.PROpen {
		t.Fatalf("save: %+v %v", pr, err)
	}
	if task, _ := s.GetTask(ctx, a); task.PRURL == nil || *task.PRURL != pr.URL {
		t.Errorf("pr_url %v", task.PRURL)
	}
	if _, err := s.SavePullRequest(ctx, models.PullRequest{TaskID: b, Owner: "o", Repo: "r", Number: 8, URL: "u8", Branch: "aq/y",
		NextCheckAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	due, soonest, err := s.DuePullRequests(ctx, now, 10)
	if err != nil || len(due) != 1 || due[0].Number != 7 || soonest.IsZero() {
		t.Fatalf("due %+v, soonest %v, %v", due, soonest, err)
	}
	pr.ETag, pr.NextCheckAt = `"abc"`, now.Add(time.Minute)
	if err := s.RecordPullRequestCheck(ctx, pr); err != nil {
		t.Fatal(err)
	}
	got, ok, _ := s.PullRequestByNumber(ctx, "O", "R", 7) // GitHub's names ignore case
	if !ok || got.ETag != `"abc"` || got.TaskID != a {
		t.Errorf("by number: %+v %v", got, ok)
	}
	// A poke makes it due now and leaves what the watcher saw alone.
	if ok, err := s.PokePullRequest(ctx, "o", "r", 7, now); !ok || err != nil {
		t.Fatalf("poke: %v %v", ok, err)
	}
	got, _, _ = s.PullRequestOf(ctx, a)
	if got.ETag != `"abc"` || got.NextCheckAt.After(now) {
		t.Errorf("after the poke: %+v", got)
	}
	if ok, _ := s.PokePullRequest(ctx, "o", "r", 99, now); ok {
		t.Error("a poke of an unknown pull request found one")
	}
	// A new attempt's pull request replaces the old one and forgets its ETag.
	if _, err := s.SavePullRequest(ctx, models.PullRequest{TaskID: a, Owner: "o", Repo: "r", Number: 9, URL: "u9", Branch: "aq/x"}); err != nil {
		t.Fatal(err)
	}
	got, _, _ = s.PullRequestOf(ctx, a)
	if got.Number != 9 || got.ETag != "" {
		t.Errorf("replaced: %+v", got)
	}
	if _, ok, _ := s.PullRequestByNumber(ctx, "o", "r", 7); ok {
		t.Error("the old number still maps to the task")
	}
	if _, err := s.SavePullRequest(ctx, models.PullRequest{TaskID: "no-such-task", Owner: "o", Repo: "r", Number: 1, URL: "u"}); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Errorf("unknown task: %v", err)
	}
}
