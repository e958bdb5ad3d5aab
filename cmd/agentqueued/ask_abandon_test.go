package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// askAgentScript hands its run's AQ_* environment to the test through a
// FIFO on its first attempt and waits to be stopped; on its second it
// keeps its prompt and completes.
const askAgentScript = `
if [ "$AQ_ATTEMPT" = 1 ]; then
  env | grep '^AQ_' > "$STATE_DIR/env.fifo"
  exec tail -f /dev/null
fi
cp "$AQ_PROMPT_FILE" "$STATE_DIR/prompt.$AQ_ATTEMPT"
exec "$WORKER_BIN" agent complete --summary "went on with the answer"
`

// TestAnAbandonedAskKeepsTheQuestionOpen: the agent's CLI gives up on a
// blocking ask (the real MCP SDK client cancels the call, as Codex does
// after its tool timeout). That is no expiry: the task keeps waiting for
// the answer (WAITING_INPUT, without a run), the question stays open, the
// run that would go on without the answer ends, and the human's answer
// runs the task again at once with the answer in the next prompt.
func TestAnAbandonedAskKeepsTheQuestionOpen(t *testing.T) {
	t.Parallel()
	bin := agentqueuedBinary(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "env.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	script := writeFile(t, dir, "agent.sh", askAgentScript)
	cfg := writeFile(t, dir, "config.yaml", `
agents:
  - name: worker
    type: command
    command: /bin/sh
    args: ["`+script+`"]
    env: {WORKER_BIN: "`+bin+`", STATE_DIR: "`+dir+`"}
`)
	changed := make(chan struct{}, 1)
	d, err := startMainWith(t, func(m *Main) {
		m.OnChange = func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}, "run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := d.watch.Context()
	addr := d.m.Addr()
	c, err := api.NewClient("http://"+addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	mustCtl(t, addr, "project", "create", "notes")
	id := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "notes", "--title", "Pick a database"))[0]
	// waitTask looks after every committed change the daemon announces;
	// only the daemon's progress keeps the wait going.
	waitTask := func(what string, ok func(models.TaskDetail) bool) models.TaskDetail {
		t.Helper()
		for {
			td, err := c.GetTask(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ok(td) {
				return td
			}
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatalf("waiting for %s: task %s is %s (%s)\n%s", what, id, td.Task.Status, td.Task.StatusReason, d.logs)
			}
		}
	}
	status := func(want models.TaskStatus) func(models.TaskDetail) bool {
		return func(td models.TaskDetail) bool { return td.Task.Status == want }
	}

	// The first run's environment, once its agent runs.
	envc := make(chan map[string]string, 1)
	go func() {
		b, err := os.ReadFile(fifo)
		env := map[string]string{}
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		if err != nil {
			env = nil
		}
		envc <- env
	}()
	var env map[string]string
	select {
	case env = <-envc:
	case <-ctx.Done():
		t.Fatalf("the agent never started: %v\n%s", d.watch.Err(), d.logs)
	}
	if env[api.EnvRunToken] == "" {
		t.Fatalf("the agent's environment lacks its token: %v", env)
	}
	cs := mcpSession(t, env)
	askCtx, cancelAsk := context.WithCancel(ctx)
	asked := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(askCtx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{"question": "Postgres or SQLite?"}})
		asked <- err
	}()
	waitTask("the question", status(models.StatusWaitingInput))
	cancelAsk() // the CLI gives up on the call
	if err := <-asked; err == nil {
		t.Fatal("the cancelled ask returned no error")
	}

	td := waitTask("the first run to end", func(td models.TaskDetail) bool { return len(td.Runs) == 1 && td.Runs[0].EndedAt != nil })
	if td.Task.Status != models.StatusWaitingInput || !strings.Contains(td.Runs[0].Error, "gave up waiting for the answer") {
		t.Errorf("after the abandoned ask: %s, the run ended with %q", td.Task.Status, td.Runs[0].Error)
	}
	qs, err := c.OpenQuestions(ctx)
	if err != nil || len(qs) != 1 || qs[0].TaskID != id || qs[0].Answer != nil || qs[0].RunEndedAt == nil {
		t.Fatalf("open questions after the abandoned ask: %+v %v", qs, err)
	}
	if td := waitTask("nothing else", func(models.TaskDetail) bool { return true }); td.Task.Status != models.StatusWaitingInput {
		t.Fatalf("the task did not wait for the answer: %s (%s)", td.Task.Status, td.Task.StatusReason)
	}

	if _, err := c.AnswerQuestion(ctx, qs[0].ID, "SQLite, please.", "ana"); err != nil {
		t.Fatal(err)
	}
	waitTask("the completion after the answer", status(models.StatusCompleted))
	prompt, err := os.ReadFile(filepath.Join(dir, "prompt.2"))
	if err != nil || !strings.Contains(string(prompt), "SQLite, please.") {
		t.Fatalf("the next prompt lacks the answer (%v):\n%s", err, prompt)
	}
}
