package service

import (
	"context"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

func TestTokenSeriesDefaults(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	h := models.Duration(time.Hour)
	tests := []struct {
		name string
		q    models.TokenSeriesQuery
		want models.TokenSeriesQuery
	}{
		{"all defaults", models.TokenSeriesQuery{}, models.TokenSeriesQuery{Since: now.Add(-24 * time.Hour), Until: now, Step: h}},
		{"a week", models.TokenSeriesQuery{Since: now.Add(-7 * 24 * time.Hour)},
			models.TokenSeriesQuery{Since: now.Add(-7 * 24 * time.Hour), Until: now, Step: models.Duration(7 * time.Hour)}},
		{"short span rounds the step up to a minute", models.TokenSeriesQuery{Since: now.Add(-10 * time.Minute)},
			models.TokenSeriesQuery{Since: now.Add(-10 * time.Minute), Until: now, Step: models.Duration(time.Minute)}},
		{"given step kept", models.TokenSeriesQuery{Step: models.Duration(30 * time.Minute)},
			models.TokenSeriesQuery{Since: now.Add(-24 * time.Hour), Until: now, Step: models.Duration(30 * time.Minute)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tokenSeriesDefaults(tc.q, now); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTokenSeriesOfTheCommandLayer(t *testing.T) {
	t.Parallel()
	st := storetest.Open(t)
	ctx := context.Background()
	if _, err := st.CreateProject(ctx, models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := st.RecordTokenUsage(ctx, models.TokenUsage{ProjectID: "web", AgentID: "a1", Input: 10, CreatedAt: now.Add(-2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	s := New(Config{Store: st})
	got, err := s.TokenSeries(ctx, models.TokenSeriesQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Step != models.Duration(time.Hour) || len(got.Buckets) != 1 || got.Buckets[0].Tokens != 10 || got.Buckets[0].AgentID != "a1" {
		t.Fatalf("got %+v", got)
	}
}
