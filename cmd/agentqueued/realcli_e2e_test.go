package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/agent/clitest"
	"github.com/agentqueued/agentqueued/internal/agent/modeltest"
	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
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
}

// newCLIRig starts a daemon with the agents and extra top-level
// configuration (YAML), and creates the project "web".
func newCLIRig(t *testing.T, agents []cliAgent, extra string, opts ...clitest.Options) *cliRig {
	t.Helper()
	bins := map[string]string{}
	for _, a := range agents {
		if _, ok := bins[a.cli]; !ok {
			bins[a.cli] = clitest.Find(t, a.cli)
		}
	}
	r := &cliRig{t: t, wake: make(chan struct{}, 1)}
	r.model = modeltest.New(modeltest.Options{Logf: t.Logf, OnRequest: func(req modeltest.Request) {
		r.signal(fmt.Sprintf("model request %d (%s turn %d)", req.Seq, req.Script, req.Turn))
	}})
	t.Cleanup(r.model.Close) // after the daemon's Close: its agents are gone by then
	r.env = clitest.Env(t, r.model.URL(), opts...)
	envJSON, err := json.Marshal(r.env)
	if err != nil {
		t.Fatal(err)
	}
	var cfg strings.Builder
	cfg.WriteString("agents:\n")
	for _, a := range agents {
		projects := a.projects
		if projects == nil {
			projects = []string{"web"}
		}
		pj, _ := json.Marshal(projects)
		fmt.Fprintf(&cfg, "  - name: %s\n    type: %s\n    command: %q\n    projects: %s\n    env: %s\n", a.name, a.cli, bins[a.cli], pj, envJSON)
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
	d, err := startMainWith(t, func(m *Main) {
		m.Executable = bin
		m.OnChange = func() { r.signal("") }
	}, "run", "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--config", cfgPath)
	if err != nil {
		t.Fatalf("start the daemon: %v\nconfig:\n%s", err, cfg.String())
	}
	r.d = d
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
	if _, err := r.c.CreateProject(d.watch.Context(), models.ProjectSpec{ID: "web",
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
// or the model see progress.
func (r *cliRig) waitTask(id, what string, ok func(models.TaskDetail) bool) models.TaskDetail {
	r.t.Helper()
	ctx := r.d.watch.Context()
	for {
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

// TestRealCLIRateLimitPausesAndResumes: the model answers a request with
// 429; the task pauses (no retry used) and the next run resumes the
// session where it stopped and lands the work.
func TestRealCLIRateLimitPausesAndResumes(t *testing.T) {
	t.Parallel()
	for _, cli := range []string{clitest.Claude, clitest.Codex} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			var profile []string
			if cli == clitest.Claude {
				profile = claudeEdits
			}
			r := newCLIRig(t, []cliAgent{{name: cli + "-1", cli: cli, profile: profile}}, "orchestrator:\n  pause_delay: 1s\n")
			r.model.Add(modeltest.Script{Name: "limited", Match: "Write despite limits", Turns: []modeltest.Turn{
				{Text: "Reading first.", Calls: []modeltest.Call{modeltest.Read("README")}},
				{Text: "Writing after the limit.", Calls: []modeltest.Call{modeltest.Write("limited.txt", "written\n")}, Error: modeltest.RateLimit(1)},
				{Text: "Done."},
			}})
			id := r.add(models.BatchTask{Title: "Write despite limits"})
			td := r.waitStatus(id, models.StatusCompleted)
			if !eventSeen(td, models.EventTokensExhausted) {
				t.Errorf("the task never paused for the rate limit: %+v", td.Events)
			}
			if td.Task.RetryCount != 0 {
				t.Errorf("the rate limit used %d retries", td.Task.RetryCount)
			}
			if got := r.onMain("limited.txt"); got != "written\n" {
				t.Errorf("main:limited.txt = %q", got)
			}
			// The resumed run went on at turn 1 with turn 0 in its history.
			var turns []int
			for _, req := range r.model.Requests() {
				if req.Script == "limited" {
					turns = append(turns, req.Turn)
				}
			}
			if fmt.Sprint(turns) != "[0 1 1 2]" {
				t.Errorf("turns of the model requests %v, want [0 1 1 2]: the second run resumes the session", turns)
			}
		})
	}
}
