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
