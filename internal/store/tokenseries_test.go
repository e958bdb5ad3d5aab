package store_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestTokenSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := storetest.Open(t)
	storetest.Project(t, s, "web")
	storetest.Project(t, s, "api")
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for _, u := range []models.TokenUsage{
		{ProjectID: "web", AgentID: "a1", Input: 100, Output: 20, CreatedAt: t0.Add(-time.Minute)}, // before since
		{ProjectID: "web", AgentID: "a1", Input: 100, Output: 20, CreatedAt: t0},
		{ProjectID: "web", AgentID: "a1", Input: 5, CacheRead: 1, CacheWrite: 2, CreatedAt: t0.Add(59 * time.Minute)},
		{ProjectID: "web", AgentID: "a2", Output: 7, CreatedAt: t0.Add(30 * time.Minute)},
		{ProjectID: "api", HookRunID: "h1", Input: 50, CreatedAt: t0.Add(90 * time.Minute)},
		{ProjectID: "web", AgentID: "a1", Input: 3, CreatedAt: t0.Add(2*time.Hour + 10*time.Minute)},
		{ProjectID: "web", AgentID: "a1", Input: 1000, CreatedAt: t0.Add(3 * time.Hour)}, // at until: excluded
	} {
		if err := s.RecordTokenUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.TokenSeries(ctx, models.TokenSeriesQuery{Since: t0, Until: t0.Add(3 * time.Hour), Step: models.Duration(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	want := []models.TokenBucket{
		{Start: t0, ProjectID: "web", AgentID: "a1", Tokens: 128},
		{Start: t0, ProjectID: "web", AgentID: "a2", Tokens: 7},
		{Start: t0.Add(time.Hour), ProjectID: "api", AgentID: "", Tokens: 50},
		{Start: t0.Add(2 * time.Hour), ProjectID: "web", AgentID: "a1", Tokens: 3},
	}
	if len(got.Buckets) != len(want) {
		t.Fatalf("got %+v, want %+v", got.Buckets, want)
	}
	for i := range want {
		if !got.Buckets[i].Start.Equal(want[i].Start) || got.Buckets[i].ProjectID != want[i].ProjectID ||
			got.Buckets[i].AgentID != want[i].AgentID || got.Buckets[i].Tokens != want[i].Tokens {
			t.Errorf("bucket %d = %+v, want %+v", i, got.Buckets[i], want[i])
		}
	}
}

func TestTokenSeriesRefusesBadQueries(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	t0 := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		q    models.TokenSeriesQuery
		want string
	}{
		{"no since", models.TokenSeriesQuery{Until: t0, Step: models.Duration(time.Hour)}, "since and until are required"},
		{"until before since", models.TokenSeriesQuery{Since: t0, Until: t0.Add(-time.Hour), Step: models.Duration(time.Hour)}, "until"},
		{"step too short", models.TokenSeriesQuery{Since: t0, Until: t0.Add(time.Hour), Step: models.Duration(time.Second)}, "step 1s"},
		{"too many buckets", models.TokenSeriesQuery{Since: t0, Until: t0.Add(1000 * time.Minute), Step: models.Duration(time.Minute)}, "more than 1000 buckets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := s.TokenSeries(context.Background(), tc.q)
			if models.ErrorCodeOf(err) != models.CodeInvalid || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want invalid naming %q", err, tc.want)
			}
		})
	}
}

func TestTokenSeriesUsesTheTimeIndex(t *testing.T) {
	t.Parallel()
	s := storetest.Open(t)
	plan, err := store.QueryPlanForTest(s, store.TokenSeriesQueryForTest, 0, 1, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`(?m)^SCAN (\w+)$`).FindString(plan); m != "" {
		t.Fatalf("full table scan (%s):\n%s", m, plan)
	}
}
