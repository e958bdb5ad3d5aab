package discord

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestDiscordShowsNoSecrets: agent views never show env values; a
// repository URL an older daemon stored with credentials (a token as the
// user name included) and reasons that quote it are shown redacted in
// replies, notices and the error view.
func TestDiscordShowsNoSecrets(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.st.RegisterAgent(ctx, models.Agent{ID: "claude-1", AgentType: "claude", AgentSettings: models.AgentSettings{
		Env: map[string]string{"ANTHROPIC_API_KEY": "sk-s3cret"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.CreateProject(ctx, models.Project{ID: "legacy", Repo: &models.RepoConfig{SourceType: models.RepoClone,
		URL: "https://example.com/owner/x.git"}}); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", "file:"+h.db+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE repos SET url = ? WHERE project_id = 'legacy'", "https://tok3n-s3cret@example.com/owner/x.git"); err != nil {
		t.Fatal(err)
	}
	db.Close()

	check := func(what, text, want string) {
		t.Helper()
		if strings.Contains(text, "s3cret") {
			t.Errorf("%s shows a secret: %q", what, text)
		}
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q: %q", what, want, text)
		}
	}
	_, text := h.answer(h.command(alice, controlChannel, "agent", subOpt("list")), 1)
	check("/agent list", text, "claude-1")
	_, text = h.answer(h.command(alice, controlChannel, "status"), 1)
	check("/status", text, "claude-1")
	_, text = h.answer(h.command(alice, controlChannel, "project", subOpt("show", strOpt("project", "legacy"))), 1)
	check("/project show", text, `https://\*\*\*@`+"\u200b"+"example.com/owner/x.git")

	h.project("web")
	id := h.task("web", "Fetch")
	h.apply(id, models.EventAssigned, models.EventAgentStarted)
	if _, err := h.st.ApplyEvent(ctx, models.TransitionRequest{TaskID: id, Event: models.EventAgentFailed,
		Reason: "fetch from https://user:tok3n-s3cret@example.com/owner/x.git: authentication failed"}); err != nil {
		t.Fatal(err)
	}
	notice := h.waitMessage(projectChannel, "failed")
	check("the failed notice", notice.Content, "authentication failed")
	_, text = h.answer(h.press(alice, notice, h.buttonID(notice, "aq|error|")), 1)
	check("the error view", text, "https://***@example.com/owner/x.git")
	_, text = h.answer(h.command(alice, controlChannel, "task", subOpt("show", strOpt("task", id))), 1)
	check("/task show", text, "authentication failed")
}
