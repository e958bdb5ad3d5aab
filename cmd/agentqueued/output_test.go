package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestCtlOutputEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	hostile := "fix \x1b[2J\x1b]0;pwned\x07 bug\tnow\r\nok"
	var out bytes.Buffer
	printTasks(&out, []models.Task{{ID: "bold-orbit", ProjectID: "web", Title: hostile, Status: models.StatusReady, CreatedAt: time.Now()}})
	printTaskDetail(&out, models.TaskDetail{Task: models.Task{ID: "bold-orbit", Title: hostile, Description: "line one\n\x1b[31mred\x1b[0m"}})
	got := out.String()
	for _, bad := range []string{"\x1b", "\x07", "\r"} {
		if strings.Contains(got, bad) {
			t.Fatalf("output carries %q:\n%s", bad, got)
		}
	}
	if !strings.Contains(got, `fix \x1b[2J\x1b]0;pwned\a bug\tnow\r\nok`) || !strings.Contains(got, `\x1b[31mred`) {
		t.Fatalf("escaped text missing:\n%s", got)
	}
	if clean("plain — text") != "plain — text" {
		t.Fatal("clean changed printable text")
	}
}

// TestTaskOutputSaysWhyATaskWaits: `ctl task list` has a WAITING column and
// `ctl task show` the reason.
func TestTaskOutputSaysWhyATaskWaits(t *testing.T) {
	t.Parallel()
	waiting := models.Task{ID: "bold-orbit", ProjectID: "web", Title: "t", Status: models.StatusReady,
		WaitingCode: models.WaitingSlots, WaitingReason: "all 2 slots of project web are busy"}
	running := models.Task{ID: "calm-river", ProjectID: "web", Title: "u", Status: models.StatusInProgress}
	var list, show bytes.Buffer
	printTasks(&list, []models.Task{waiting, running})
	printTask(&show, waiting)
	lines := strings.Split(strings.TrimSpace(list.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "WAITING") || !strings.Contains(lines[1], "slots_busy") ||
		!strings.Contains(lines[2], " - ") {
		t.Fatalf("task list:\n%s", list.String())
	}
	if !strings.Contains(show.String(), "Waiting:            all 2 slots of project web are busy (slots_busy)") {
		t.Fatalf("task show:\n%s", show.String())
	}
}
