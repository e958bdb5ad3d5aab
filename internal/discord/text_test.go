package discord

import (
	"context"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestTaskAddRefusesTextThatBreaksLater: a slash command is an entry
// point of task text; a NUL in a title used to reach git. The refusal is
// an ephemeral answer naming the option, and nothing is created.
func TestTaskAddRefusesTextThatBreaksLater(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	tests := []struct {
		name string
		opts []*discordgo.ApplicationCommandInteractionDataOption
		want string
	}{
		{"NUL in the title", []*discordgo.ApplicationCommandInteractionDataOption{strOpt("title", "Fix the build\x00")},
			"⚠️ title: control character U+0000 (NUL) at character 14 is not allowed (one line of printable text)"},
		{"ESC in the title", []*discordgo.ApplicationCommandInteractionDataOption{strOpt("title", "\x1b[31mRed")},
			"⚠️ title: control character U+001B (ESC) at character 1 is not allowed (one line of printable text)"},
		{"C1 control in the description", []*discordgo.ApplicationCommandInteractionDataOption{strOpt("title", "Fix"),
			strOpt("description", "see\u009bhere")},
			"⚠️ description: control character U+009B at character 4 is not allowed (text takes printable characters, line breaks and tabs)"},
		{"NUL in a test command", []*discordgo.ApplicationCommandInteractionDataOption{strOpt("title", "Fix"),
			strOpt("test_commands", "go vet ./...; go test\x00")},
			"⚠️ test_commands[1]: control character U+0000 (NUL) at character 8 is not allowed (text takes printable characters, line breaks and tabs)"},
		{"title over the cap", []*discordgo.ApplicationCommandInteractionDataOption{strOpt("title", strings.Repeat("é", models.MaxTitleLen+1))},
			"⚠️ title: at most 300 characters (got 301)"},
	}
	for _, tc := range tests {
		r, text := h.answer(h.command(alice, projectChannel, "task", subOpt("add", tc.opts...)), 1)
		if !ephemeralFlag(r) || text != tc.want {
			t.Errorf("%s: answered %q (ephemeral %v), want %q", tc.name, text, ephemeralFlag(r), tc.want)
		}
	}
	if ts, err := h.st.ListTasks(context.Background(), models.TaskFilter{}); err != nil || len(ts) != 0 {
		t.Fatalf("%d tasks created (%v)", len(ts), err)
	}
	// Unicode and a multi-line description are text, not control characters.
	r, text := h.answer(h.command(alice, projectChannel, "task", subOpt("add", strOpt("title", "Corriger l'été 🚀"),
		strOpt("description", "Steps:\n\t1. build"))), 1)
	if ephemeralFlag(r) || !strings.Contains(text, "Added `") {
		t.Fatalf("task add answered %q", text)
	}
	noRefusals(t, h)
}

func TestProjectCommandsRefuseBadTextAndEmptyEdits(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	for _, tc := range []struct {
		name string
		sub  *discordgo.ApplicationCommandInteractionDataOption
		want string
	}{
		{"create with a NUL in the name", subOpt("create", strOpt("id", "api"), strOpt("name", "The\x00 API")),
			"⚠️ name: control character U+0000 (NUL) at character 4 is not allowed (one line of printable text)"},
		{"edit with a line break in the name", subOpt("edit", strOpt("project", "web"), strOpt("name", "Web\nApp")),
			"⚠️ name: control character U+000A (line feed) at character 4 is not allowed (one line of printable text)"},
		{"edit with nothing", subOpt("edit", strOpt("project", "web")),
			"⚠️ Nothing to change: give name, channel, credit_weight, max_agents or budget."},
	} {
		r, text := h.answer(h.command(root, controlChannel, "project", tc.sub), 1)
		if !ephemeralFlag(r) || text != tc.want {
			t.Errorf("%s: answered %q (ephemeral %v), want %q", tc.name, text, ephemeralFlag(r), tc.want)
		}
	}
	ps, err := h.st.ListProjects(context.Background())
	if err != nil || len(ps) != 1 || ps[0].Name != "Project web" {
		t.Fatalf("projects %+v, %v", ps, err)
	}
}

func TestARejectionWithAControlCharacterIsRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	id := h.awaitingApproval("web", "Not yet")
	notice := h.waitMessageWith(projectChannel, "🙋 `"+id+"` Not yet needs your approval")
	r, _ := h.answer(h.press(alice, notice, customID("reject", id)), 1)
	if r.Type != discordgo.InteractionResponseModal || r.Data == nil {
		t.Fatalf("Reject opened %+v, want the feedback modal", r)
	}
	r, text := h.answer(h.submit(alice, projectChannel, r.Data.CustomID, "Needs tests\x00"), 1)
	if want := "⚠️ feedback: control character U+0000 (NUL) at character 12 is not allowed " +
		"(text takes printable characters, line breaks and tabs)"; !ephemeralFlag(r) || text != want {
		t.Errorf("reject modal: %q (ephemeral %v), want %q", text, ephemeralFlag(r), want)
	}
	h.wantStatus(t, id, models.StatusAwaitingApproval)
	if fb, err := h.st.TaskFeedback(context.Background(), id); err != nil || len(fb) != 0 {
		t.Errorf("feedback %+v, %v", fb, err)
	}
	r, text = h.answer(h.command(alice, controlChannel, "task", subOpt("approve", strOpt("task", id), strOpt("note", "ok\x1b"))), 1)
	if !ephemeralFlag(r) || !strings.HasPrefix(text, "⚠️ note: control character U+001B (ESC)") {
		t.Errorf("approve with a note: %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	h.wantStatus(t, id, models.StatusAwaitingApproval)
}
