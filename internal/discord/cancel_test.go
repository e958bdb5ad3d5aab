package discord

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bwmarrin/discordgo"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestTaskCancelCommand cancels a queued task with /task cancel: refused to
// a person who is not an admin, done for an admin with the reason, and a
// repeat changes nothing and says so.
func TestTaskCancelCommand(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	ctx := context.Background()
	up := h.task("web", "Upstream")
	hard := h.task("web", "Hard", up)
	cancel := subOpt("cancel", strOpt("task", up), strOpt("reason", "duplicate of another"))

	r, text := h.answer(h.command(alice, controlChannel, "task", cancel), 1)
	if !ephemeralFlag(r) || text != "🚫 `/task cancel` needs an admin (`discord.admin_users`)." {
		t.Errorf("/task cancel by a non-admin: %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	h.wantStatus(t, up, models.StatusReady)

	_, text = h.answer(h.command(root, controlChannel, "task", cancel), 1)
	if want := fmt.Sprintf("Cancelled `%s` by <@%s>: READY → BLOCKED. Blocked with it: 1 dependent(s).", up, root); text != want {
		t.Errorf("/task cancel: %q, want %q", text, want)
	}
	tk, err := h.st.GetTask(ctx, up)
	if err != nil || tk.Status != models.StatusBlocked || tk.StatusReason != "cancelled by "+actor(root)+": duplicate of another" {
		t.Errorf("cancelled task: %+v %v", tk, err)
	}
	h.wantStatus(t, hard, models.StatusBlocked)

	_, text = h.answer(h.command(root, controlChannel, "task", subOpt("cancel", strOpt("task", up))), 1)
	if !strings.HasPrefix(text, fmt.Sprintf("Nothing done: `%s` is BLOCKED now", up)) {
		t.Errorf("a repeated /task cancel: %q", text)
	}
	noRefusals(t, h)
}

// TestCancelButtonOnNotices presses the Cancel button of a failed task's
// notice: refused to a person who is not an admin, applied for an admin
// (the notice updated, its buttons gone), and a stale press changes nothing.
func TestCancelButtonOnNotices(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	ctx := context.Background()
	failing, run := h.startedTask("agent-f", "web", "Breaks")
	if _, err := h.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed, ExpectFrom: models.StatusInProgress,
		Reason: "tests failed", Outcome: "failed"}); err != nil {
		t.Fatal(err)
	}
	notice := h.waitMessageWith(projectChannel, "❌ `"+failing+"` Breaks failed")
	id := h.buttonID(notice, "aq|event|ADMIN_CANCEL|")
	if id != customID("event", "ADMIN_CANCEL", failing, "FAILED") {
		t.Fatalf("cancel button %q", id)
	}

	r, text := h.answer(h.press(alice, notice, id), 1)
	if !ephemeralFlag(r) || text != "🚫 Cancelling a task needs an admin." {
		t.Errorf("Cancel pressed by a non-admin: %q (ephemeral %v)", text, ephemeralFlag(r))
	}
	h.wantStatus(t, failing, models.StatusFailed)

	r, text = h.answer(h.press(root, notice, id), 1)
	want := notice.Content + "\n" + fmt.Sprintf("Cancelled `%s` by <@%s>: FAILED → BLOCKED.", failing, root)
	if r.Type != discordgo.InteractionResponseUpdateMessage || ephemeralFlag(r) || text != want {
		t.Errorf("Cancel pressed by an admin: type %d ephemeral %v %q, want %q", r.Type, ephemeralFlag(r), text, want)
	}
	if r.Message != nil && len(customIDs(r.Message)) != 0 {
		t.Errorf("the notice keeps its buttons %v", customIDs(r.Message))
	}
	if tk, _ := h.st.GetTask(ctx, failing); tk.Status != models.StatusBlocked || tk.StatusReason != "cancelled by "+actor(root) {
		t.Errorf("cancelled task: %s %q", tk.Status, tk.StatusReason)
	}

	_, text = h.answer(h.press(root, notice, id), 1)
	if !strings.Contains(text, fmt.Sprintf("Nothing done: `%s` is BLOCKED now", failing)) {
		t.Errorf("a stale Cancel: %q", text)
	}
	noRefusals(t, h)
}

// TestAnswerButtonOfACancelledTasksQuestion presses the Answer button of a
// question whose task was cancelled since: no form opens, the person is
// told the question was closed, and /questions no longer lists it.
func TestAnswerButtonOfACancelledTasksQuestion(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.project("web")
	ctx := context.Background()
	asking, run := h.startedTask("agent-q", "web", "Asking work")
	q, err := h.st.AskQuestion(ctx, run.ID, "Which colour?")
	if err != nil {
		t.Fatal(err)
	}
	r, _ := h.answer(h.command(alice, controlChannel, "questions"), 1)
	if r.Message == nil {
		t.Fatal("/questions made no message")
	}
	answerID := customID("answer", fmt.Sprint(q.ID), asking)
	if _, err := h.st.ApplyEvent(ctx, models.TransitionRequest{TaskID: asking, Event: models.EventAdminCancel, Actor: actor(root)}); err != nil {
		t.Fatal(err)
	}
	r, text := h.answer(h.press(alice, r.Message, answerID), 1)
	if r.Type == discordgo.InteractionResponseModal || !ephemeralFlag(r) ||
		text != fmt.Sprintf("Question #%d was closed: its task was cancelled.", q.ID) {
		t.Errorf("Answer of a closed question: type %d %q (ephemeral %v)", r.Type, text, ephemeralFlag(r))
	}
	_, text = h.answer(h.command(alice, controlChannel, "questions"), 1)
	if strings.Contains(text, "Which colour?") {
		t.Errorf("/questions still lists the closed question: %q", text)
	}
	noRefusals(t, h)
}
