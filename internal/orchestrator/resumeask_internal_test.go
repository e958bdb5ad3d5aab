package orchestrator

import (
	"context"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// A relayed ask sent again after a restart waits for the question it
// made, and only for that one: the run's last question when it asks the
// same and is open or answered; an earlier question's answer, or another
// text, is never taken for it.
func TestResumedAskFindsOnlyTheQuestionItAsked(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	ctx := context.Background()
	if _, err := h.st.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	id := h.tasks(models.BatchTask{LocalID: "t", Title: "Paint"})["t"]
	run, _, err := h.st.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.st.StartRun(ctx, run.ID, 1, ""); err != nil {
		t.Fatal(err)
	}
	find := func(text string, resuming bool) (models.Question, bool) {
		t.Helper()
		q, asked, err := h.o.openQuestionOf(ctx, run, models.Ask{Question: text}, resuming)
		if err != nil {
			t.Fatal(err)
		}
		return q, asked
	}
	if _, asked := find("Which colour?", true); asked {
		t.Fatal("a run without questions has one to wait for")
	}
	first, err := h.st.AskQuestion(ctx, run.ID, "Which colour?")
	if err != nil {
		t.Fatal(err)
	}
	if _, asked := find("Which colour?", false); asked {
		t.Error("an ask that is not resumed waits for an earlier question")
	}
	if q, asked := find("Which colour?", true); !asked || q.ID != first.ID {
		t.Errorf("the resumed ask waits for %d (%v), want the open question %d", q.ID, asked, first.ID)
	}
	if _, asked := find("Which brush?", true); asked {
		t.Error("a resumed ask of another text waits for the open question")
	}
	if _, err := h.st.AnswerQuestion(ctx, first.ID, "teal", "tester"); err != nil {
		t.Fatal(err)
	}
	if q, asked := find("Which colour?", true); !asked || q.Answer == nil || *q.Answer != "teal" {
		t.Errorf("the resumed ask of an answered question: %+v (%v), want its answer", q, asked)
	}
	// The daemon died before a second question was written: the first
	// question's answer is not taken for it.
	if _, asked := find("Which brush?", true); asked {
		t.Error("a resumed ask whose question was never written takes an earlier question's answer")
	}
}
