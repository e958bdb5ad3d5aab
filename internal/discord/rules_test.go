package discord

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestStatusShowsTheRulesInForce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	if _, text := h.answer(h.command(alice, controlChannel, "status"), 1); strings.Contains(text, "**Rules**") {
		t.Errorf("/status shows rules when there are none:\n%s", text)
	}
	var rules []models.Rule
	if err := json.Unmarshal([]byte(`[
		{"id": "ingest-cap", "type": "Capacity", "matcher": {"kind": "ingest", "status": "Running", "fields": ["source"]}, "max_capacity": 100},
		{"type": "Concurency", "project_id": "web", "matcher": {"kind": "deploy"}, "max_concurency": 1}]`), &rules); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.ReplaceRules(context.Background(), rules, "ops"); err != nil {
		t.Fatal(err)
	}
	_, text := h.answer(h.command(alice, controlChannel, "status"), 1)
	for _, want := range []string{"**Rules**",
		"📏 `ingest-cap` at most 100 items of remaining work of kind ingest per source \\(Running\\), all projects",
		"📏 at most 1 running of kind deploy \\(Unfinished\\), project web"} {
		if !strings.Contains(text, want) {
			t.Errorf("/status lacks %q:\n%s", want, text)
		}
	}
}

func TestTaskDetailShowsItemCounts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		task models.Task
		want string // empty: no items line
	}{
		{"counts reported", models.Task{ExpectedCount: 100, SuccessCount: 30, FailureCount: 2}, "items: 30 succeeded, 2 failed of 100 expected"},
		{"nothing reported yet", models.Task{ExpectedCount: 40}, "items: 0 succeeded, 0 failed of 40 expected"},
		{"a task without items", models.Task{}, ""},
	} {
		tc.task.ID, tc.task.Title, tc.task.Status = "bold-orbit", "Ingest", models.StatusInProgress
		got := renderTaskDetail(models.TaskDetail{Task: tc.task})
		if tc.want == "" && strings.Contains(got, "items:") || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
