package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent/clitest"
	"github.com/agentqueued/agentqueued/internal/agent/modeltest"
	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
)

// These end-to-end tests run the real claude and codex binaries (found by
// internal/agent/clitest; skipped without them, failing in CI) under a
// whole daemon — its configuration file, the real adapters, the agentqueued
// MCP server it gives every run (the built binary), real git — against the
// scripted fake model of internal/agent/modeltest.

// cliRig is one daemon whose agents run a real CLI against a fake model,
// with one CLONE project "web" on a bare origin.
type cliRig struct {
	t      *testing.T
	model  *modeltest.Server
	env    map[string]string // the CLIs' private environment
	d      *daemon
	c      *api.Client
	origin string
	bin    string        // the built daemon binary, the runs' AQ_BIN
	wake   chan struct{} // a committed change, a log line or a model request

	mu    sync.Mutex
	watch func(string) // the daemon's watchdog, once it runs
}

// cliAgent is an agent of the rig's configuration.
type cliAgent struct {
	name, cli string
	// profile is the agent's profile as YAML lines (indented by the rig).
	profile []string
	// projects it takes work from; default [web].
	projects []string
	// env is set over the rig's settings for this agent.
	env map[string]string
}

// rigOptions change a rig.
type rigOptions struct {
	cli   clitest.Options
	model modeltest.Options
}

// newCLIRig starts a daemon with the agents and extra top-level
// configuration (YAML), and creates the project "web". The CLIs' keys are
// in the daemon's environment and reach each agent through its pass_env,
// as a user's configuration has them (docs/agents.md, "Secrets").
func newCLIRig(t *testing.T, agents []cliAgent, extra string, opts ...rigOptions) *cliRig {
	t.Helper()
	var o rigOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	bins := map[string]string{}
	for _, a := range agents {
		if _, ok := bins[a.cli]; !ok {
			bins[a.cli] = clitest.Find(t, a.cli)
		}
	}
	r := &cliRig{t: t, wake: make(chan struct{}, 1)}
	mo := o.model
	mo.Logf = t.Logf
	mo.OnRequest = func(req modeltest.Request) {
		r.signal(fmt.Sprintf("model request %d (%s turn %d)", req.Seq, req.Script, req.Turn))
	}
	r.model = modeltest.New(mo)
	t.Cleanup(r.model.Close) // after the daemon's Close: its agents are gone by then
	r.env = clitest.Env(t, r.model.URL(), o.cli)
	var cfg strings.Builder
	cfg.WriteString("agents:\n")
	for _, a := range agents {
		projects := a.projects
		if projects == nil {
			projects = []string{"web"}
		}
		pj, _ := json.Marshal(projects)
		pe, _ := json.Marshal(clitest.PassEnv(a.cli))
		env := maps.Clone(r.env)
		maps.Copy(env, a.env)
		envJSON, _ := json.Marshal(env)
		fmt.Fprintf(&cfg, "  - name: %s\n    type: %s\n    command: %q\n    projects: %s\n    pass_env: %s\n    env: %s\n", a.name, a.cli,
			bins[a.cli], pj, pe, envJSON)
		if len(a.profile) > 0 {
			cfg.WriteString("    profile:\n")
			for _, l := range a.profile {
				cfg.WriteString("      " + l + "\n")
			}
		}
	}
	cfg.WriteString(extra)
	dir := t.TempDir()
	r.origin = filepath.Join(dir, "origin.git")
	bareOrigin(t, r.origin)
	cfgPath := writeFile(t, dir, "config.yaml", cfg.String())
	bin := agentqueuedBinary(t)
	environ := []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range clitest.Keys() {
		environ = append(environ, k+"="+v)
	}
	d, err := startMainWith(t, func(m *Main) {
		m.Executable = bin
		m.Environ = environ
		m.OnChange = func() { r.signal("") }
	}, "run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfgPath)
	if err != nil {
		t.Fatalf("start the daemon: %v\nconfig:\n%s", err, cfg.String())
	}
	r.d, r.bin = d, bin
	r.mu.Lock()
	r.watch = d.watch.Progress
	r.mu.Unlock()
	// Not every status change is a store change (a question asked is
	// not): each line the daemon logs wakes the waits too.
	d.logs.mu.Lock()
	logged := d.logs.onWrite
	d.logs.onWrite = func(p []byte) {
		logged(p)
		r.signal("")
	}
	d.logs.mu.Unlock()
	if r.c, err = api.NewClient("http://"+d.m.Addr(), "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.CreateProject(d.watch.Context(), models.Project{ID: "web",
		Repo: &models.RepoConfig{SourceType: models.RepoClone, URL: r.origin}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// signal wakes the rig's waits; a non-empty what is progress.
func (r *cliRig) signal(what string) {
	r.mu.Lock()
	watch := r.watch
	r.mu.Unlock()
	if watch != nil && what != "" {
		watch(what)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// add creates one task in "web" and returns its id.
func (r *cliRig) add(bt models.BatchTask) string {
	r.t.Helper()
	bt.LocalID = "t"
	res, err := r.c.CreateTasks(r.d.watch.Context(), models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{bt}})
	if err != nil {
		r.t.Fatal(err)
	}
	return res[0].TaskID
}

// waitTask waits until the task satisfies ok, looking again after every
// committed change, log line and model request, for as long as the daemon
// or the model see progress. A model request no script could answer (a
// tool not offered, a turn past the script) fails the test at once.
func (r *cliRig) waitTask(id, what string, ok func(models.TaskDetail) bool) models.TaskDetail {
	r.t.Helper()
	ctx := r.d.watch.Context()
	for {
		if un := r.model.Unscripted(); len(un) > 0 {
			r.t.Fatalf("waiting for %s: the model could not follow its script: %q\n%s", what, un, r.d.logs)
		}
		td, err := r.c.GetTask(ctx, id)
		if err != nil {
			r.t.Fatalf("waiting for %s: %v\n%s", what, err, r.d.logs)
		}
		if ok(td) {
			return td
		}
		select {
		case <-r.wake:
		case <-ctx.Done():
			r.t.Fatalf("waiting for %s: task %s is %s (%s)\nunscripted: %q\n%s", what, id, td.Task.Status, td.Task.StatusReason,
				r.model.Unscripted(), r.d.logs)
		}
	}
}

// waitStatus waits for the task to be in status want; a task that ends
// otherwise (COMPLETED or BLOCKED) fails the test at once.
func (r *cliRig) waitStatus(id string, want models.TaskStatus) models.TaskDetail {
	r.t.Helper()
	td := r.waitTask(id, fmt.Sprintf("task %s to be %s", id, want), func(td models.TaskDetail) bool {
		s := td.Task.Status
		return s == want || s == models.StatusCompleted || s == models.StatusBlocked
	})
	if td.Task.Status != want {
		r.t.Fatalf("task %s is %s (%s), want %s\nevents: %s\nunscripted: %q", id, td.Task.Status, td.Task.StatusReason, want,
			eventList(td), r.model.Unscripted())
	}
	return td
}

// eventList is the task's audit log, one event a line.
func eventList(td models.TaskDetail) string {
	var b strings.Builder
	for _, e := range td.Events {
		fmt.Fprintf(&b, "\n  %s %s -> %s: %s", e.Event, e.From, e.To, e.Reason)
	}
	return b.String()
}

// onMain returns path's content on the origin's main, "" when absent.
func (r *cliRig) onMain(path string) string {
	out, err := exec.Command("git", "--git-dir", r.origin, "show", "main:"+path).CombinedOutput()
	if err != nil {
		return ""
	}
	return string(out)
}

// claudeEdits is a claude profile that may edit files.
var claudeEdits = []string{"permission_mode: acceptEdits"}

// TestRealCLIEditLandsOnMain: the model writes a file with the CLI's own
// edit tool; the task completes and its change is merged into main.
func TestRealCLIEditLandsOnMain(t *testing.T) {
	t.Parallel()
	for _, cli := range []string{clitest.Claude, clitest.Codex} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			var profile []string
			if cli == clitest.Claude {
				profile = claudeEdits
			}
			r := newCLIRig(t, []cliAgent{{name: cli + "-1", cli: cli, profile: profile}}, "")
			r.model.Add(modeltest.Script{Name: "greet", Match: "Add a greeting", Turns: []modeltest.Turn{
				{Text: "Writing the greeting.", Calls: []modeltest.Call{modeltest.Write("greeting.txt", "hello from "+cli+"\n")}},
				{Text: "The greeting is in greeting.txt."},
			}})
			id := r.add(models.BatchTask{Title: "Add a greeting", Description: "Write greeting.txt."})
			td := r.waitStatus(id, models.StatusCompleted)
			if got := r.onMain("greeting.txt"); got != "hello from "+cli+"\n" {
				t.Fatalf("main:greeting.txt = %q; task %+v", got, td.Task)
			}
			if un := r.model.Unscripted(); len(un) > 0 {
				t.Errorf("unscripted model requests: %q", un)
			}
		})
	}
}

// eventSeen reports whether the task's audit log holds the event.
func eventSeen(td models.TaskDetail, ev models.TaskEvent) bool {
	for _, e := range td.Events {
		if e.Event == ev {
			return true
		}
	}
	return false
}

// runArgs returns the command lines of the task's live agent processes
// (those whose environment names the task), read from /proc.
func runArgs(taskID string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !procEnvHas(pid, "AQ_TASK_ID="+taskID) {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil {
			out = append(out, strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
		}
	}
	return out
}

// codexStandInToolTimeout stands in for Codex's default MCP tool timeout
// (300 s) in the private Codex config: an ask outliving it proves the
// daemon gave Codex its own timeout.
const codexStandInToolTimeout = 2 * time.Second

// TestRealCLIReportsAskAndCompletes: the model reports progress through
// agentqueued's MCP server, asks a question and waits, gets the answer a
// person gave through the API after a while, writes the file the answer
// chose and completes with a summary and outputs. With the stock
// configuration: no allowed tools for claude, no approval settings for
// codex.
func TestRealCLIReportsAskAndCompletes(t *testing.T) {
	t.Parallel()
	for _, cli := range []string{clitest.Claude, clitest.Codex} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			var profile []string
			if cli == clitest.Claude {
				profile = claudeEdits
			}
			r := newCLIRig(t, []cliAgent{{name: cli + "-1", cli: cli, profile: profile}}, "orchestrator:\n  input_timeout: 2h\n",
				rigOptions{cli: clitest.Options{CodexConfig: fmt.Sprintf("[mcp_servers.agentqueued]\ntool_timeout_sec = %d",
					int(codexStandInToolTimeout.Seconds()))}})
			r.model.Add(modeltest.Script{Name: "ask", Match: "Greet as told", Turns: []modeltest.Turn{
				{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "progress", map[string]any{"message": "Reading the task"})}},
				{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "ask", map[string]any{"question": "Which greeting: hello or hi?"})}},
				{Text: "Writing it.", Calls: []modeltest.Call{modeltest.Write("greeting.txt", "hi\n")}},
				{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "complete", map[string]any{"summary": "Wrote the greeting the human chose",
					"files_changed": []string{"greeting.txt"}, "outputs": map[string]any{"greeting": "hi"}})}},
				{Text: "Done."},
			}})
			id := r.add(models.BatchTask{Title: "Greet as told", Description: "Ask which greeting, then write greeting.txt."})
			r.waitStatus(id, models.StatusWaitingInput)
			ctx := r.d.watch.Context()
			qs, err := r.c.OpenQuestions(ctx)
			if err != nil || len(qs) != 1 || qs[0].TaskID != id || qs[0].Text != "Which greeting: hello or hi?" {
				t.Fatalf("open questions %+v, %v", qs, err)
			}
			if cli == clitest.Codex {
				args := strings.Join(runArgs(id), "\n")
				want := fmt.Sprintf("mcp_servers.agentqueued.tool_timeout_sec=%d", int64((2*time.Hour+orchestrator.ToolTimeoutMargin)/time.Second))
				if !strings.Contains(args, want) {
					t.Errorf("codex's command lines lack the input timeout as its MCP tool timeout:\n%s", args)
				}
			}
			// The CLI waits longer than its own default tool timeout (a
			// stand-in of 2 s): this wait is what is tested.
			select {
			case <-time.After(2 * codexStandInToolTimeout):
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
			if td, err := r.c.GetTask(ctx, id); err != nil || td.Task.Status != models.StatusWaitingInput {
				t.Fatalf("after the CLI's own tool timeout the task is %s (%s), %v\n%s", td.Task.Status, td.Task.StatusReason, err, r.d.logs)
			}
			if _, err := r.c.AnswerQuestion(ctx, qs[0].ID, "hi, please", "ana"); err != nil {
				t.Fatal(err)
			}
			td := r.waitStatus(id, models.StatusCompleted)
			if got := r.onMain("greeting.txt"); got != "hi\n" {
				t.Errorf("main:greeting.txt = %q", got)
			}
			if td.Result == nil || td.Result.Summary != "Wrote the greeting the human chose" || string(td.Result.Outputs) != `{"greeting":"hi"}` {
				t.Errorf("result %+v", td.Result)
			}
			if logs := r.d.logs.String(); !strings.Contains(logs, `msg=progress`) || !strings.Contains(logs, `message="Reading the task"`) {
				t.Errorf("no progress report in the daemon's log")
			}
			// What the CLI sent: agentqueued's tools among those offered,
			// and the person's answer as the ask tool's result.
			offered := map[string]string{clitest.Claude: "mcp__agentqueued__complete", clitest.Codex: "mcp__agentqueued.complete"}[cli]
			var answered, saw bool
			for _, req := range r.model.Requests() {
				saw = saw || req.Offers(offered)
				for _, tr := range req.ToolResults {
					answered = answered || strings.Contains(tr.Content, "hi, please")
				}
			}
			if !saw {
				t.Errorf("no model request offered %s", offered)
			}
			if !answered {
				t.Errorf("the answer never reached the model as the ask tool's result")
			}
			if un := r.model.Unscripted(); len(un) > 0 {
				t.Errorf("unscripted model requests: %q", un)
			}
		})
	}
}

// TestRealCLIReviewsApproveAndReject: QA_AGENT tasks reviewed by a real
// claude or codex reviewer: one review approves and the work is merged,
// the other rejects and the task fails with the reviewer's reasons.
func TestRealCLIReviewsApproveAndReject(t *testing.T) {
	t.Parallel()
	for _, cli := range []string{clitest.Claude, clitest.Codex} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			var profile []string
			if cli == clitest.Claude {
				profile = claudeEdits
			}
			r := newCLIRig(t, []cliAgent{{name: "worker", cli: cli, profile: profile},
				{name: "reviewer", cli: cli, projects: []string{"none"}}}, "verification:\n  qa_agent: reviewer\n")
			zero := 0
			good := r.add(models.BatchTask{Title: "Write the good file", VerificationType: models.VerifyQAAgent, MaxRetries: &zero})
			bad := r.add(models.BatchTask{Title: "Write the bad file", VerificationType: models.VerifyQAAgent, MaxRetries: &zero})
			r.model.Add(
				modeltest.Script{Name: "approve", Match: "# Review of task " + good, Turns: []modeltest.Turn{
					{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "approve", map[string]any{"reasons": "good.txt says good"})}},
					{Text: "Approved."}}},
				modeltest.Script{Name: "reject", Match: "# Review of task " + bad, Turns: []modeltest.Turn{
					{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "reject", map[string]any{"reasons": "bad.txt must say good"})}},
					{Text: "Rejected."}}},
				modeltest.Script{Name: "good", Match: "Write the good file", Turns: []modeltest.Turn{
					{Calls: []modeltest.Call{modeltest.Write("good.txt", "good\n")}}, {Text: "Written."}}},
				modeltest.Script{Name: "bad", Match: "Write the bad file", Turns: []modeltest.Turn{
					{Calls: []modeltest.Call{modeltest.Write("bad.txt", "bad\n")}}, {Text: "Written."}}},
			)
			r.waitStatus(good, models.StatusCompleted)
			if got := r.onMain("good.txt"); got != "good\n" {
				t.Errorf("main:good.txt = %q", got)
			}
			td := r.waitStatus(bad, models.StatusBlocked)
			if r.onMain("bad.txt") != "" {
				t.Errorf("rejected work is on main")
			}
			var reasons bool
			for _, e := range td.Events {
				reasons = reasons || e.Event == models.EventVerifyFailed && strings.Contains(e.Reason, "bad.txt must say good")
			}
			if !reasons {
				t.Errorf("no VERIFY_FAILED with the reviewer's reasons: %+v", td.Events)
			}
			if un := r.model.Unscripted(); len(un) > 0 {
				t.Errorf("unscripted model requests: %q", un)
			}
		})
	}
}

// TestRealClaudeDeniedWritesFailTheRun: claude with no permission mode has
// its Write denied; the run fails naming the denied tool, nothing lands.
func TestRealClaudeDeniedWritesFailTheRun(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t, []cliAgent{{name: "claude-1", cli: clitest.Claude}}, "")
	r.model.Add(modeltest.Script{Name: "denied", Match: "Write without leave", Turns: []modeltest.Turn{
		{Calls: []modeltest.Call{modeltest.Write("denied.txt", "nope\n")}},
		{Text: "I could not write the file."},
	}})
	zero := 0
	id := r.add(models.BatchTask{Title: "Write without leave", MaxRetries: &zero})
	td := r.waitTask(id, "the task to end", func(td models.TaskDetail) bool {
		return td.Task.Status == models.StatusCompleted || td.Task.Status == models.StatusBlocked || td.Task.Status == models.StatusFailed
	})
	if td.Task.Status == models.StatusCompleted {
		t.Fatalf("a run whose write was denied completed: %s", td.Task.StatusReason)
	}
	if r.onMain("denied.txt") != "" {
		t.Errorf("denied.txt is on main")
	}
	var named bool
	for _, e := range td.Events {
		named = named || e.Event == models.EventAgentFailed && strings.Contains(e.Reason, "Write") && strings.Contains(e.Reason, "permission_mode")
	}
	if !named {
		t.Errorf("no failure naming the denied tool and the setting that allows it:%s", eventList(td))
	}
}

// TestRealCLIRateLimitPausesAndResumes: the model answers 429 until the
// task has paused — the CLI's own retries (on, as a user's are) all get
// it too — then lifts the limit; the next run resumes the session where
// it stopped and lands the work. Claude Code's ten retries back off for
// about three minutes, so its agent has two (CLAUDE_CODE_MAX_RETRIES):
// the retries still run, and the test stays short. Codex's five take
// seconds, but the daemon pauses the task at the first 429 Codex prints.
func TestRealCLIRateLimitPausesAndResumes(t *testing.T) {
	t.Parallel()
	for _, cli := range []string{clitest.Claude, clitest.Codex} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			a := cliAgent{name: cli + "-1", cli: cli}
			if cli == clitest.Claude {
				a.profile, a.env = claudeEdits, map[string]string{"CLAUDE_CODE_MAX_RETRIES": "2"}
			}
			r := newCLIRig(t, []cliAgent{a}, "orchestrator:\n  pause_delay: 1s\n")
			limit := modeltest.RateLimit(1 << 20)
			r.model.Add(modeltest.Script{Name: "limited", Match: "Write despite limits", Turns: []modeltest.Turn{
				{Text: "Reading first.", Calls: []modeltest.Call{modeltest.Read("README")}},
				{Text: "Writing after the limit.", Calls: []modeltest.Call{modeltest.Write("limited.txt", "written\n")}, Error: limit},
				{Text: "Done."},
			}})
			id := r.add(models.BatchTask{Title: "Write despite limits"})
			r.waitTask(id, "the task to pause for the rate limit", func(td models.TaskDetail) bool {
				return eventSeen(td, models.EventTokensExhausted)
			})
			r.model.EndErrors()
			td := r.waitStatus(id, models.StatusCompleted)
			if td.Task.RetryCount != 0 {
				t.Errorf("the rate limit used %d retries", td.Task.RetryCount)
			}
			if got := r.onMain("limited.txt"); got != "written\n" {
				t.Errorf("main:limited.txt = %q", got)
			}
			// The resumed run went on at turn 1 with turn 0 in its history:
			// the turns, repeats left out, never start again from 0.
			var turns []int
			retried := 0
			for _, req := range r.model.Requests() {
				if req.Script != "limited" {
					continue
				}
				if n := len(turns); n > 0 && turns[n-1] == req.Turn {
					retried++
					continue
				}
				turns = append(turns, req.Turn)
			}
			if fmt.Sprint(turns) != "[0 1 2]" {
				t.Errorf("turns of the model requests %v, want [0 1 2]: the second run resumes the session", turns)
			}
			// Claude retries silently (system/api_retry lines); the daemon
			// stops Codex at the first 429 it reports.
			if cli == clitest.Claude && retried < 2 {
				t.Errorf("turn 1 was asked %d times more: the CLI did not retry the 429 itself", retried)
			}
		})
	}
}

// TestRealClaudeToolsReachAModelThatDoesNotSearch: Claude Code defers MCP
// tools behind ToolSearch; the adapter turns that off for a run with
// agentqueued's server (ENABLE_TOOL_SEARCH=false), so a model that never
// searches still reports progress, asks, and completes.
func TestRealClaudeToolsReachAModelThatDoesNotSearch(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t, []cliAgent{{name: "claude-1", cli: clitest.Claude, profile: claudeEdits}}, "",
		rigOptions{model: modeltest.Options{NoToolSearch: true}})
	r.model.Add(modeltest.Script{Name: "direct", Match: "Report without searching", Turns: []modeltest.Turn{
		{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "progress", map[string]any{"message": "Starting"})}},
		{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "ask", map[string]any{"question": "Which word?"})}},
		{Calls: []modeltest.Call{modeltest.Write("word.txt", "yes\n")}},
		{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "complete", map[string]any{"summary": "Wrote the word"})}},
		{Text: "Done."},
	}})
	id := r.add(models.BatchTask{Title: "Report without searching"})
	r.waitStatus(id, models.StatusWaitingInput)
	ctx := r.d.watch.Context()
	qs, err := r.c.OpenQuestions(ctx)
	if err != nil || len(qs) != 1 {
		t.Fatalf("open questions %+v, %v", qs, err)
	}
	if _, err := r.c.AnswerQuestion(ctx, qs[0].ID, "yes", "ana"); err != nil {
		t.Fatal(err)
	}
	td := r.waitStatus(id, models.StatusCompleted)
	if td.Result == nil || td.Result.Summary != "Wrote the word" || r.onMain("word.txt") != "yes\n" {
		t.Errorf("result %+v, main:word.txt %q", td.Result, r.onMain("word.txt"))
	}
	for _, req := range r.model.Requests() {
		if req.Script == "direct" && req.Offers("ToolSearch") && !req.Offers("mcp__agentqueued__complete") {
			t.Errorf("request %d offers ToolSearch without agentqueued's tools: %q", req.Seq, req.Tools)
		}
	}
}

// TestRealCodexRefusedWritesFailTheRun: the real codex under
// workspace-write. A write its apply_patch fails (a file where a directory
// stands: a file_change item "failed") fails the run naming the file; a
// write outside the checkout, which codex's sandbox rejects before any
// file_change (it says so only on standard error), ends with nothing to
// land and the task is not completed: the reason says codex refused the
// write, and why.
func TestRealCodexRefusedWritesFailTheRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, title string
		turns       []modeltest.Turn
		// reason is in an AGENT_FAILED or VERIFY_FAILED reason.
		reason string
	}{
		{"failed file change", "Write over a directory", []modeltest.Turn{
			{Calls: []modeltest.Call{modeltest.Shell("mkdir adir")}},
			{Calls: []modeltest.Call{modeltest.Write("adir", "x\n")}},
			{Text: "Could not."}}, "codex could not make 1 file change(s) (add "},
		{"sandbox refusal", "Write outside the checkout", []modeltest.Turn{
			{Calls: []modeltest.Call{modeltest.Write("/etc/aq-refused/x.txt", "x\n")}},
			{Text: "Could not."}}, "codex refused a write (patch rejected: writing outside of the project; " +
			"rejected by user approval settings); the agent made no changes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newCLIRig(t, []cliAgent{{name: "codex-1", cli: clitest.Codex}}, "")
			r.model.Add(modeltest.Script{Name: "refused", Match: tc.title, Turns: tc.turns})
			zero := 0
			id := r.add(models.BatchTask{Title: tc.title, MaxRetries: &zero})
			td := r.waitTask(id, "the task to end", func(td models.TaskDetail) bool {
				return td.Task.Status == models.StatusCompleted || td.Task.Status == models.StatusBlocked || td.Task.Status == models.StatusFailed
			})
			if td.Task.Status == models.StatusCompleted {
				t.Fatalf("a run whose write was refused completed: %s", td.Task.StatusReason)
			}
			var named bool
			for _, e := range td.Events {
				named = named || (e.Event == models.EventAgentFailed || e.Event == models.EventVerifyFailed) && strings.Contains(e.Reason, tc.reason)
			}
			if !named {
				t.Errorf("no failure saying %q:%s", tc.reason, eventList(td))
			}
			if _, err := os.Stat("/etc/aq-refused"); err == nil {
				t.Errorf("codex wrote outside its checkout")
			}
		})
	}
}

// TestRealCLIPlansAndReportsFromAShell: a plan proposed through the MCP
// server splits the task (it completes, its subtasks are created and run),
// and an agent reports from a shell with `<AQ_BIN> agent complete …`
// instead of MCP: claude through its Bash rule, codex under
// danger-full-access (its sandboxes refuse the daemon's socket).
func TestRealCLIPlansAndReportsFromAShell(t *testing.T) {
	t.Parallel()
	for _, cli := range []string{clitest.Claude, clitest.Codex} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			profile := []string{"permission_mode: danger-full-access"}
			if cli == clitest.Claude {
				profile = claudeEdits
			}
			r := newCLIRig(t, []cliAgent{{name: cli + "-1", cli: cli, profile: profile}}, "")
			done := func(name, match string) modeltest.Script {
				return modeltest.Script{Name: name, Match: match, Turns: []modeltest.Turn{
					{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "complete", map[string]any{"summary": name + " needed nothing", "no_changes": true})}},
					{Text: "Done."}}}
			}
			r.model.Add(
				modeltest.Script{Name: "plan", Match: "Split the work", Turns: []modeltest.Turn{
					{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "propose_plan", map[string]any{"tasks": []map[string]any{
						{"id": "a", "title": "First part of the split"}, {"id": "b", "title": "Second part of the split", "depends_on": []string{"a"}}}})}},
					{Text: "Planned."}}},
				// The second's prompt names the first (its upstream): match
				// on the task's own heading, the second's first.
				done("second", ": Second part of the split\n"), done("first", ": First part of the split\n"),
				modeltest.Script{Name: "shell", Match: "Report from a shell", Turns: []modeltest.Turn{
					{Calls: []modeltest.Call{modeltest.Shell(r.bin + " agent complete --no-changes --summary 'reported from the shell'")}},
					{Text: "Reported."}}},
			)
			plan := r.add(models.BatchTask{Title: "Split the work"})
			r.waitStatus(plan, models.StatusCompleted)
			shell := r.add(models.BatchTask{Title: "Report from a shell"})
			td := r.waitStatus(shell, models.StatusCompleted)
			if td.Result == nil || td.Result.Summary != "reported from the shell" {
				t.Errorf("the shell's report is not the result: %+v", td.Result)
			}
			tasks, err := r.c.ListTasks(r.d.watch.Context(), models.TaskFilter{ProjectID: "web"})
			if err != nil {
				t.Fatal(err)
			}
			var subtasks []string
			for _, tk := range tasks {
				if tk.IsPlanSubtask && tk.ParentTaskID != nil && *tk.ParentTaskID == plan {
					subtasks = append(subtasks, tk.ID)
				}
			}
			if len(subtasks) != 2 {
				t.Fatalf("plan subtasks %v of %d tasks", subtasks, len(tasks))
			}
			for _, id := range subtasks {
				if td := r.waitStatus(id, models.StatusCompleted); td.Result == nil || !strings.HasSuffix(td.Result.Summary, " needed nothing") {
					t.Errorf("subtask %s result %+v", id, td.Result)
				}
			}
			var scripts []string
			for _, req := range r.model.Requests() {
				if !slices.Contains(scripts, req.Script) {
					scripts = append(scripts, req.Script)
				}
			}
			if !slices.Contains(scripts, "first") || !slices.Contains(scripts, "second") {
				t.Errorf("the subtasks' runs followed the scripts %q", scripts)
			}
		})
	}
}

// TestRealClaudeGivesUpOnAskThenResumes: claude gives up on a blocking
// ask (its MCP tool timeout, MCP_TOOL_TIMEOUT, shortened to 2 s here);
// the daemon keeps the question open and the task waiting without a run;
// the answer starts a run that resumes the session and lands the work.
func TestRealClaudeGivesUpOnAskThenResumes(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t, []cliAgent{{name: "claude-1", cli: clitest.Claude, profile: claudeEdits,
		env: map[string]string{"MCP_TOOL_TIMEOUT": "2000"}}}, "orchestrator:\n  input_timeout: 2h\n")
	r.model.Add(modeltest.Script{Name: "giveup", Match: "Ask, then go on later", Turns: []modeltest.Turn{
		{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "ask", map[string]any{"question": "Which name?"})}},
		{Calls: []modeltest.Call{modeltest.Write("name.txt", "ana\n")}},
		{Calls: []modeltest.Call{modeltest.MCP("agentqueued", "complete", map[string]any{"summary": "Wrote the name"})}},
		{Text: "Done."},
	}})
	id := r.add(models.BatchTask{Title: "Ask, then go on later"})
	td := r.waitTask(id, "the CLI to give up on its question", func(td models.TaskDetail) bool {
		return td.Task.Status == models.StatusWaitingInput && len(td.Runs) > 0 && td.Runs[0].Error != ""
	})
	if !strings.Contains(td.Runs[0].Error, "gave up waiting for the answer") {
		t.Errorf("the run's error %q does not say the agent gave up", td.Runs[0].Error)
	}
	ctx := r.d.watch.Context()
	qs, err := r.c.OpenQuestions(ctx)
	if err != nil || len(qs) != 1 || qs[0].Text != "Which name?" {
		t.Fatalf("open questions %+v, %v", qs, err)
	}
	if _, err := r.c.AnswerQuestion(ctx, qs[0].ID, "ana, please", "ana"); err != nil {
		t.Fatal(err)
	}
	td = r.waitStatus(id, models.StatusCompleted)
	if td.Result == nil || td.Result.Summary != "Wrote the name" || r.onMain("name.txt") != "ana\n" {
		t.Errorf("result %+v, main:name.txt %q", td.Result, r.onMain("name.txt"))
	}
	var answered, fresh bool
	for i, req := range r.model.Requests() {
		answered = answered || strings.Contains(req.UserText, "ana, please")
		fresh = fresh || i > 0 && req.Script == "giveup" && req.Turn == 0
	}
	if !answered {
		t.Errorf("the answer never reached the model")
	}
	if fresh {
		t.Errorf("a later run started the conversation afresh instead of resuming the session")
	}
}
