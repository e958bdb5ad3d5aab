package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/store"
	"github.com/agentqueued/agentqueued/internal/store/storetest"
)

// waitLimit guards channel waits so that a broken test fails instead of
// hanging; it never orders events. It is the generous stall limit of
// progresstest: a loaded machine must never reach it.
var waitLimit = progresstest.Stall()

// pendingAsk is an ask the service waits on; the test answers it.
type pendingAsk struct {
	question string
	def      *string
	answer   chan string
}

// runService is an api.RunService over the real store that records what
// the agent told it.
type runService struct {
	st   *store.Store
	asks chan pendingAsk

	mu          sync.Mutex
	heartbeats  int
	progress    []string
	completions []models.Completion
	rateLimits  []models.RateLimit
	verdicts    []string
}

func (s *runService) Authenticate(ctx context.Context, token string) (models.Run, error) {
	return s.st.RunByToken(ctx, token)
}

func (s *runService) Heartbeat(ctx context.Context, run models.Run) error {
	s.mu.Lock()
	s.heartbeats++
	s.mu.Unlock()
	return s.st.TouchRun(ctx, run.ID)
}

func (s *runService) Progress(ctx context.Context, run models.Run, p models.TaskProgress) error {
	s.mu.Lock()
	s.progress = append(s.progress, p.Message)
	s.mu.Unlock()
	if p.HasCounts() {
		if _, err := s.st.SetTaskProgress(ctx, run.ID, p.Succeeded, p.Failed); err != nil {
			return err
		}
	}
	return s.st.TouchRun(ctx, run.ID)
}

func (s *runService) Ask(ctx context.Context, _ models.Run, ask models.Ask) (string, error) {
	p := pendingAsk{question: ask.Question, def: ask.Default, answer: make(chan string, 1)}
	select {
	case s.asks <- p:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case a := <-p.answer:
		return a, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (s *runService) Complete(ctx context.Context, run models.Run, c models.Completion) error {
	s.mu.Lock()
	s.completions = append(s.completions, c)
	s.mu.Unlock()
	_, err := s.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentCompleted,
		ExpectFrom: models.StatusInProgress, Reason: c.Summary, Outcome: "completed"})
	return err
}

func (s *runService) Fail(ctx context.Context, run models.Run, message string) error {
	_, err := s.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventAgentFailed,
		ExpectFrom: models.StatusInProgress, Reason: message, Outcome: "failed", Error: message})
	return err
}

func (s *runService) Usage(ctx context.Context, _ models.Run, u models.TokenUsage) error {
	return s.st.RecordTokenUsage(ctx, u)
}

func (s *runService) RateLimited(ctx context.Context, run models.Run, r models.RateLimit) error {
	s.mu.Lock()
	s.rateLimits = append(s.rateLimits, r)
	s.mu.Unlock()
	resume := time.Now().Add(time.Minute)
	if r.ResetAt != nil {
		resume = *r.ResetAt
	}
	_, err := s.st.FinishRun(ctx, models.RunEnd{RunID: run.ID, Event: models.EventTokensExhausted,
		ExpectFrom: models.StatusInProgress, Reason: r.Message, ResumeAfter: &resume, Outcome: "rate_limited"})
	return err
}

func (s *runService) ProposePlan(ctx context.Context, run models.Run, plan models.TaskBatch) ([]models.BatchResult, error) {
	for i := range plan.Tasks {
		plan.Tasks[i].ParentTaskID = run.TaskID
		plan.Tasks[i].IsPlanSubtask = true
		plan.Tasks[i].PlanSource = "agent"
	}
	return s.st.CreateTasks(ctx, plan)
}

// Verdict records a reviewer's verdict as feedback on the run's task.
func (s *runService) Verdict(ctx context.Context, run models.Run, approve bool, reasons string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.verdicts = append(s.verdicts, fmt.Sprintf("%v:%s", approve, reasons))
	return nil
}

// agentEnv is an RPC server over a store-backed service with project "web".
type agentEnv struct {
	t      *testing.T
	st     *store.Store
	svc    *runService
	socket string
}

func newAgentEnv(t *testing.T) *agentEnv {
	t.Helper()
	st := storetest.Open(t)
	if _, err := st.CreateProject(context.Background(), models.Project{ID: "web"}); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "aq")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := &agentEnv{t: t, st: st, svc: &runService{st: st, asks: make(chan pendingAsk)}, socket: filepath.Join(dir, "rpc.sock")}
	srv, err := api.NewRPCServer(api.RPCConfig{SocketPath: e.socket}, e.svc)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return e
}

// startRun creates a task, claims it for a new agent and starts the run; it
// returns the AQ_* environment of the run.
func (e *agentEnv) startRun(title string) map[string]string {
	e.t.Helper()
	ctx := context.Background()
	res, err := e.st.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{{Title: title}}})
	if err != nil {
		e.t.Fatal(err)
	}
	agentID := "agent-" + res[0].TaskID
	if _, err := e.st.RegisterAgent(ctx, models.Agent{ID: agentID, AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		e.t.Fatal(err)
	}
	run, token, err := e.st.ClaimTask(ctx, res[0].TaskID, agentID)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.StartRun(ctx, run.ID, 4242, "/work/"+agentID); err != nil {
		e.t.Fatal(err)
	}
	return map[string]string{api.EnvSocket: e.socket, api.EnvTaskID: run.TaskID, api.EnvRunToken: token}
}

// status returns a task's status.
func (e *agentEnv) status(id string) models.TaskStatus {
	e.t.Helper()
	task, err := e.st.GetTask(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return task.Status
}

// runAgentCmd runs "agentqueued agent ARGS..." with env and stdin.
func runAgentCmd(env map[string]string, stdin string, args ...string) ctlResult {
	var stdout, stderr bytes.Buffer
	ctx := withStdin(context.Background(), strings.NewReader(stdin))
	code := NewMain(append([]string{"agent"}, args...), &stdout, &stderr, envOf(env)).Exec(ctx)
	return ctlResult{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// wantExit checks a command's exit status and that its stderr contains msg.
func wantExit(t *testing.T, r ctlResult, code int, msg string) {
	t.Helper()
	if r.code != code || !strings.Contains(r.stderr, msg) {
		t.Errorf("exit %d, stderr %q; want exit %d with %q (stdout %q)", r.code, r.stderr, code, msg, r.stdout)
	}
}

func TestAgentCommands(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	env := e.startRun("Build the thing")
	task := env[api.EnvTaskID]

	wantExit(t, runAgentCmd(env, "", "heartbeat"), 0, "")
	wantExit(t, runAgentCmd(env, "", "progress", "schema", "drafted"), 0, "")
	wantExit(t, runAgentCmd(env, "tests pass\n", "progress", "-"), 0, "")
	wantExit(t, runAgentCmd(env, "", "progress"), 2, "error: agent progress: MESSAGE is required")
	e.svc.mu.Lock()
	if e.svc.heartbeats != 1 || strings.Join(e.svc.progress, "|") != "schema drafted|tests pass" {
		t.Errorf("service saw heartbeats=%d progress=%q", e.svc.heartbeats, e.svc.progress)
	}
	e.svc.mu.Unlock()

	wantExit(t, runAgentCmd(env, "", "usage", "--input", "10", "--output", "5", "--cache-read", "2"), 0, "")
	if n, err := e.st.TokensUsedSince(context.Background(), "web", time.Time{}); err != nil || n != 17 {
		t.Errorf("tokens used = %d, %v; want 17", n, err)
	}
	wantExit(t, runAgentCmd(env, "", "usage", "--input", "10"), 2, "--input and --output are required")
	wantExit(t, runAgentCmd(env, "", "usage", "--input", "-1", "--output", "0"), 1, "error: input_tokens: must not be negative")

	// ask prints the answer once a human gives it.
	asked := make(chan ctlResult, 1)
	go func() { asked <- runAgentCmd(env, "", "ask", "Postgres", "or", "SQLite?") }()
	select {
	case p := <-e.svc.asks:
		if p.question != "Postgres or SQLite?" {
			t.Errorf("question = %q", p.question)
		}
		p.answer <- "SQLite"
	case r := <-asked:
		t.Fatalf("ask returned before it was answered: %+v", r)
	case <-time.After(waitLimit):
		t.Fatal("the service was never asked")
	}
	if r := <-asked; r.code != 0 || r.stdout != "SQLite\n" {
		t.Errorf("ask = exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}

	dir := t.TempDir()
	plan := writeFile(t, dir, "plan.json", `{"tasks":[{"id":"a","title":"First"},
		{"id":"b","title":"Second","dependencies":[{"id":"a"}]}]}`)
	r := runAgentCmd(env, "", "plan", "--file", plan)
	if r.code != 0 || !strings.Contains(r.stdout, "READY") || !strings.Contains(r.stdout, "DEFINED") {
		t.Errorf("plan --file = exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runAgentCmd(env, `[{"id":"c","title":"Third"}]`, "plan", "--json")
	var br api.BatchResponse
	if err := json.Unmarshal([]byte(r.stdout), &br); r.code != 0 || err != nil || len(br.Results) != 1 || br.Results[0].LocalID != "c" {
		t.Errorf("plan from stdin = exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	} else if sub, err := e.st.GetTask(context.Background(), br.Results[0].TaskID); err != nil ||
		sub.ParentTaskID == nil || *sub.ParentTaskID != task {
		t.Errorf("subtask %+v, %v: want parent %s", sub, err, task)
	}
	wantExit(t, runAgentCmd(env, `{"tasks":[{"title":"x","colour":"red"}]}`, "plan"), 1, `unknown field "colour"`)
	wantExit(t, runAgentCmd(env, `{"tasks":[{"title":"x","project_id":"web"}]}`, "plan"), 1, "project_id: set by the daemon")

	wantExit(t, runAgentCmd(env, "", "complete", "--outputs", "{nope"), 2, "--outputs: not valid JSON")
	wantExit(t, runAgentCmd(env, "", "complete", "--summary", "x", "also", "this"), 2, "not both")
	wantExit(t, runAgentCmd(env, "", "complete", "--summary", "Built it", "--files", "a.go, b.go",
		"--outputs", `{"port":8080}`), 0, "")
	if st := e.status(task); st != models.StatusVerifying {
		t.Errorf("task after complete = %s, want VERIFYING", st)
	}
	e.svc.mu.Lock()
	if len(e.svc.completions) != 1 || e.svc.completions[0].Summary != "Built it" ||
		strings.Join(e.svc.completions[0].FilesChanged, ",") != "a.go,b.go" || string(e.svc.completions[0].Outputs) != `{"port":8080}` {
		t.Errorf("service saw completions %+v", e.svc.completions)
	}
	e.svc.mu.Unlock()
	// The run has ended: its token no longer works.
	wantExit(t, runAgentCmd(env, "", "complete", "again"), 1, "error: the run of this token has ended")
	if st := e.status(task); st != models.StatusVerifying {
		t.Errorf("task after a second complete = %s, want VERIFYING", st)
	}
}

func TestAgentFailAndRateLimited(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)

	env := e.startRun("Doomed")
	wantExit(t, runAgentCmd(env, "the API is gone\n", "fail", "-"), 0, "")
	if st := e.status(env[api.EnvTaskID]); st != models.StatusFailed {
		t.Errorf("task after fail = %s, want FAILED", st)
	}

	env = e.startRun("Throttled")
	wantExit(t, runAgentCmd(env, "", "rate-limited", "--in", "5m", "--reset", "2030-01-01T00:00:00Z"), 2, "not both")
	wantExit(t, runAgentCmd(env, "", "rate-limited", "--reset", "soon"), 2, "not an RFC 3339 time")
	wantExit(t, runAgentCmd(env, "", "rate-limited", "--kind", "weather"), 1, "kind: must be rate_limit or tokens")
	wantExit(t, runAgentCmd(env, "", "rate-limited", "--reset", "2030-01-01T00:00:00Z", "--kind", "tokens",
		"--message", "quota exhausted"), 0, "")
	task, err := e.st.GetTask(context.Background(), env[api.EnvTaskID])
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != models.StatusPaused || task.ResumeAfter == nil || task.ResumeAfter.Year() != 2030 {
		t.Errorf("task after rate-limited = %s until %v", task.Status, task.ResumeAfter)
	}
	e.svc.mu.Lock()
	if len(e.svc.rateLimits) != 1 || e.svc.rateLimits[0].Kind != "tokens" || e.svc.rateLimits[0].Message != "quota exhausted" {
		t.Errorf("service saw %+v", e.svc.rateLimits)
	}
	e.svc.mu.Unlock()
}

func TestAgentCommandErrors(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	env := e.startRun("Guarded")

	wantExit(t, runAgentCmd(map[string]string{api.EnvTaskID: "x"}, "", "heartbeat"), 2,
		"error: AQ_SOCKET, AQ_RUN_TOKEN are not set")
	wantExit(t, runAgentCmd(nil, "", "progress", "hello"), 2, "AQ_SOCKET, AQ_TASK_ID, AQ_RUN_TOKEN are not set")

	bad := map[string]string{api.EnvSocket: env[api.EnvSocket], api.EnvTaskID: env[api.EnvTaskID], api.EnvRunToken: "nope"}
	r := runAgentCmd(bad, "", "heartbeat")
	wantExit(t, r, 1, "error: unknown run token")
	if strings.Contains(r.stderr, "Usage:") {
		t.Errorf("a refused call printed the usage:\n%s", r.stderr)
	}
	other := map[string]string{api.EnvSocket: env[api.EnvSocket], api.EnvTaskID: "some-other-task", api.EnvRunToken: env[api.EnvRunToken]}
	wantExit(t, runAgentCmd(other, "", "heartbeat"), 1, "error: this run token is for another task")
	gone := map[string]string{api.EnvSocket: filepath.Join(filepath.Dir(e.socket), "missing.sock"),
		api.EnvTaskID: env[api.EnvTaskID], api.EnvRunToken: env[api.EnvRunToken]}
	wantExit(t, runAgentCmd(gone, "", "heartbeat"), 1, "missing.sock")

	wantExit(t, runAgentCmd(env, "", "dance"), 2, `error: agent: unknown command "dance"`)
	wantExit(t, runAgentCmd(env, "", "heartbeat", "extra"), 2, `unexpected argument "extra"`)
	wantExit(t, runAgentCmd(env, ""), 2, "agent: missing command")
	if r := runAgentCmd(nil, "", "-h"); r.code != 0 || !strings.Contains(r.stdout, "rate-limited") {
		t.Errorf("agent -h = exit %d\n%s", r.code, r.stdout)
	}
	if r := runAgentCmd(nil, "", "usage", "-h"); r.code != 0 || !strings.Contains(r.stdout, "-cache-read") {
		t.Errorf("agent usage -h = exit %d\n%s", r.code, r.stdout)
	}
	e.svc.mu.Lock()
	defer e.svc.mu.Unlock()
	if e.svc.heartbeats != 0 {
		t.Errorf("a refused call reached the service %d time(s)", e.svc.heartbeats)
	}
}

func TestAgentAskCancelled(t *testing.T) {
	t.Parallel()
	e := newAgentEnv(t)
	env := e.startRun("Curious")
	ctx, cancel := context.WithCancel(withStdin(context.Background(), strings.NewReader("")))
	defer cancel()
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- NewMain([]string{"agent", "ask", "Still", "there?"}, &stdout, &stderr, envOf(env)).Exec(ctx)
	}()
	select {
	case <-e.svc.asks:
	case <-time.After(waitLimit):
		t.Fatal("the service was never asked")
	}
	cancel()
	if code := <-done; code != 1 || !strings.Contains(stderr.String(), context.Canceled.Error()) {
		t.Errorf("cancelled ask = exit %d, stderr %q", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("cancelled ask printed %q", stdout.String())
	}
}

// Compile-time check that the test service is a RunService.
var _ api.RunService = (*runService)(nil)
