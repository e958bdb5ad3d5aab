package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
	"github.com/agentqueued/agentqueued/internal/runner"
)

// shimArg makes the test binary an agent's shim (agent.RunShim).
const shimArg = "runner-test-shim"

// lifeEnv makes the test binary a runner's earlier life (earlierLife):
// its value is the life's settings, as JSON.
const lifeEnv = "RUNNER_TEST_EARLIER_LIFE"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == shimArg {
		os.Exit(agent.RunShim(os.Args[2:]))
	}
	if s := os.Getenv(lifeEnv); s != "" {
		os.Exit(earlierLife(s))
	}
	os.Exit(m.Run())
}

// life is what both lives of a test's runner are started with.
type life struct {
	Server, DataDir, Script, Hold string
}

// config is the runner's configuration: one command agent a0 running
// Script with $HOLD set, its shim the test binary.
func (l life) config() (runner.Config, error) {
	u, err := url.Parse(l.Server)
	if err != nil {
		return runner.Config{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return runner.Config{}, err
	}
	return runner.Config{Server: u, Token: "aqr_test", Agents: []models.RunnerAgent{{Name: "a0", AgentType: "command"}},
		AgentConfigs: []models.Agent{{ID: "a0", AgentType: "command", AgentSettings: models.AgentSettings{Command: l.Script,
			Env: map[string]string{"HOLD": l.Hold}}}},
		DataDir: l.DataDir, Shim: []string{exe, shimArg}, OutputPoll: time.Millisecond,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}, nil
}

// earlierLife runs a runner until it is killed.
func earlierLife(settings string) int {
	var l life
	if err := json.Unmarshal([]byte(settings), &l); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg, err := l.config()
	if err == nil {
		var r *runner.Runner
		if r, err = runner.New(cfg); err == nil {
			err = r.Run(context.Background())
		}
	}
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// fakeDaemon is the daemon's side of the runner protocol, enough for one
// run: it offers the run once, applies reports in order (answering one
// sent again as before), appends the log at its offset, and refuses
// everything about the run once it no longer has it.
type fakeDaemon struct {
	t    *testing.T
	srv  *httptest.Server
	asg  models.RunnerAssignment
	wake chan struct{} // a report or a log chunk arrived

	mu      sync.Mutex
	offered bool
	gone    bool
	applied []models.RunnerReport
	log     []byte
}

func newFakeDaemon(t *testing.T) *fakeDaemon {
	d := &fakeDaemon{t: t, wake: make(chan struct{}, 1),
		asg: models.RunnerAssignment{RunID: 7, Token: "run-token", Agent: "a0", ProjectID: "p", Attempt: 1, Kind: "task",
			Task: models.Task{ID: "brave-otter"}, Heartbeat: models.Duration(50 * time.Millisecond)}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.RunnerPrefix+"/hello", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, models.RunnerWelcome{Runner: "r", Agents: []string{"r/a0"}, PollHold: models.Duration(time.Second)})
	})
	mux.HandleFunc("GET "+api.RunnerPrefix+"/poll", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		offer := !d.offered
		d.offered = true
		d.mu.Unlock()
		if offer {
			writeJSON(w, models.RunnerPoll{Runs: []models.RunnerAssignment{d.asg}})
			return
		}
		select { // held, as the daemon holds a poll
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
		writeJSON(w, models.RunnerPoll{})
	})
	mux.HandleFunc("POST "+api.RunnerPrefix+"/heartbeat", func(w http.ResponseWriter, r *http.Request) {
		var ans models.RunnerHeartbeatAnswer
		d.mu.Lock()
		if d.gone {
			ans.End = []models.RunnerEnd{{RunID: d.asg.RunID, Reason: "its lease was lost"}}
		}
		d.mu.Unlock()
		writeJSON(w, ans)
	})
	mux.HandleFunc("POST "+api.RunnerPrefix+"/runs/{id}/reports", func(w http.ResponseWriter, r *http.Request) {
		var rep models.RunnerReport
		if err := json.NewDecoder(r.Body).Decode(&rep); err != nil || rep.Validate() != nil {
			writeError(w, models.CodeInvalid, fmt.Sprint("bad report: ", err, rep.Validate()))
			return
		}
		defer d.poke()
		d.mu.Lock()
		defer d.mu.Unlock()
		last := int64(len(d.applied))
		switch {
		case d.gone:
			writeError(w, models.CodeConflict, "not this runner's: it ended or its lease was lost")
		case rep.Seq == last+1:
			d.applied = append(d.applied, rep)
			d.answer(w, rep)
		case rep.Seq <= last:
			d.answer(w, d.applied[rep.Seq-1])
		default:
			writeError(w, models.CodeConflict, fmt.Sprintf("report %d is out of order: the next is %d", rep.Seq, last+1))
		}
	})
	mux.HandleFunc("POST "+api.RunnerPrefix+"/runs/{id}/log", func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.ParseInt(r.URL.Query().Get("offset"), 10, 64)
		data := new(bytes.Buffer)
		data.ReadFrom(r.Body) //nolint:errcheck // a short body is a short chunk
		defer d.poke()
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gone {
			writeError(w, models.CodeConflict, "not this runner's")
			return
		}
		if have := int64(len(d.log)); off <= have && off+int64(data.Len()) > have {
			d.log = append(d.log, data.Bytes()[have-off:]...)
		}
		writeJSON(w, api.RunnerLogAnswer{Have: int64(len(d.log))})
	})
	d.srv = httptest.NewServer(mux)
	t.Cleanup(d.srv.Close)
	return d
}

// answer answers report rep.
func (d *fakeDaemon) answer(w http.ResponseWriter, rep models.RunnerReport) {
	var ans models.RunnerReportAnswer
	if rep.Kind == models.ReportPrepared {
		ans.Launch = &models.RunnerLaunch{Prompt: "do it\n"}
	}
	writeJSON(w, ans)
}

func (d *fakeDaemon) poke() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// await waits until done holds of what the daemon has.
func (d *fakeDaemon) await(what string, done func(applied []models.RunnerReport, log string) bool) {
	d.t.Helper()
	ctx := progresstest.Context(d.t)
	for {
		d.mu.Lock()
		ok := done(d.applied, string(d.log))
		d.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-d.wake:
		case <-ctx.Done():
			d.mu.Lock()
			defer d.mu.Unlock()
			d.t.Fatalf("waiting for %s: reports %+v, log %q", what, d.applied, d.log)
		}
	}
}

// kinds lists the kinds of the reports applied.
func kinds(reps []models.RunnerReport) []string {
	var out []string
	for _, r := range reps {
		out = append(out, r.Kind)
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the runner retries
}

func writeError(w http.ResponseWriter, code models.ErrorCode, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code.HTTPStatus())
	json.NewEncoder(w).Encode(api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: msg}}) //nolint:errcheck // the runner retries
}

// holdScript prints a line, waits for a line from the FIFO $HOLD, prints
// another and exits 3.
const holdScript = `#!/bin/sh
cat > /dev/null
echo one
read -r _ < "$HOLD"
echo two
exit 3
`

// A runner killed while its agent works takes the agent up in its next
// life: when the agent still runs, its end comes with its real status;
// when it ended meanwhile, its status file gives the end; when it died
// without a status, the run is reported lost; when the daemon no longer
// has the run, the agent is ended. The log reaches the daemon whole and
// once, and the reports go on in order from the earlier life's.
func TestRunnerRestartTakesUpItsAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// away is what happens while the runner is down.
		away    func(t *testing.T, l life, shim int)
		gone    bool // the daemon no longer has the run
		release bool // the agent is let go in the runner's next life
		// call is set to call the runner, in its next life, on the socket
		// the agent was given, which the next life's configuration moved.
		call     bool
		log      string
		exit     int
		lost     bool
		reported []string
	}{
		{name: "still running", release: true, call: true, log: "one\ntwo\n", exit: 3,
			reported: []string{"prepared", "started", "rpc", "ended"}},
		{name: "ended while the runner was down", log: "one\ntwo\n", exit: 3,
			reported: []string{"prepared", "started", "ended"},
			away: func(t *testing.T, l life, shim int) {
				releaseHold(t, l.Hold)
				awaitGone(t, shim)
			}},
		{name: "died without a status", log: "one\n", exit: -1, lost: true,
			reported: []string{"prepared", "started", "ended"},
			away: func(t *testing.T, l life, shim int) {
				if err := syscall.Kill(-shim, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				awaitGone(t, shim)
			}},
		{name: "the daemon no longer has the run", gone: true, log: "one\n", reported: []string{"prepared", "started"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := newFakeDaemon(t)
			// Short: the runner's socket is in it.
			dir, err := os.MkdirTemp("", "rr")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			l := life{Server: d.srv.URL, DataDir: filepath.Join(dir, "data"), Script: filepath.Join(dir, "agent.sh"),
				Hold: filepath.Join(dir, "hold")}
			if err := os.WriteFile(l.Script, []byte(holdScript), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(l.Hold, 0o600); err != nil {
				t.Fatal(err)
			}
			shim := runEarlierLife(t, d, l)
			t.Cleanup(func() { syscall.Kill(-shim, syscall.SIGKILL) }) //nolint:errcheck // clean-up
			if tc.away != nil {
				tc.away(t, l, shim)
			}
			d.mu.Lock()
			d.gone = tc.gone
			d.mu.Unlock()

			cfg, err := l.config()
			if err != nil {
				t.Fatal(err)
			}
			cfg.SocketPath = filepath.Join(l.DataDir, "moved.sock")
			r, err := runner.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			ran := make(chan error, 1)
			go func() { ran <- r.Run(ctx) }()
			if tc.call {
				callRunner(t, filepath.Join(l.DataDir, "rpc.sock"), d.asg)
			}
			if tc.release {
				releaseHold(t, l.Hold)
			}
			if tc.gone {
				awaitGone(t, shim)
			} else {
				d.await("the run's end", func(reps []models.RunnerReport, _ string) bool {
					return len(reps) > 0 && reps[len(reps)-1].Kind == models.ReportEnded
				})
			}
			cancel()
			if err := <-ran; err != nil {
				t.Fatal(err)
			}
			d.mu.Lock()
			defer d.mu.Unlock()
			if fmt.Sprint(kinds(d.applied)) != fmt.Sprint(tc.reported) {
				t.Errorf("reports applied: %v, want %v", kinds(d.applied), tc.reported)
			}
			if string(d.log) != tc.log {
				t.Errorf("the daemon's log %q, want %q", d.log, tc.log)
			}
			if !tc.gone {
				end := d.applied[len(d.applied)-1].Ended
				if end.ExitCode != tc.exit || end.Lost != tc.lost || end.LogSize != int64(len(tc.log)) {
					t.Errorf("end %+v, want exit %d lost %v", end, tc.exit, tc.lost)
				}
			}
			if agent.Alive(shim) {
				t.Errorf("the shim %d is alive", shim)
			}
			if left, _ := filepath.Glob(filepath.Join(l.DataDir, "journal", "*")); len(left) > 0 {
				t.Errorf("the journal keeps %v", left)
			}
		})
	}
}

// runEarlierLife runs the runner's earlier life as a process of its own
// until its agent printed its first line and the daemon has it, kills it,
// and returns the agent's shim, which outlives it.
func runEarlierLife(t *testing.T, d *fakeDaemon, l life) int {
	t.Helper()
	settings, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), lifeEnv+"="+string(settings))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	defer func() {
		cmd.Process.Kill() //nolint:errcheck // it may have died
		<-exited
	}()
	d.await("the first line", func(reps []models.RunnerReport, log string) bool { return log == "one\n" })
	cmd.Process.Kill() //nolint:errcheck // it dies
	<-exited
	data, err := os.ReadFile(filepath.Join(l.DataDir, "journal", strconv.FormatInt(d.asg.RunID, 10)+".json"))
	if err != nil {
		t.Fatalf("journal: %v\n%s", err, stderr.String())
	}
	var e struct{ Shim agent.ShimID }
	if err := json.Unmarshal(data, &e); err != nil || !agent.ShimAlive(e.Shim) {
		t.Fatalf("the journal's shim %+v (%v) is not alive:\n%s", e.Shim, err, data)
	}
	return e.Shim.PID
}

// releaseHold writes the line the agent waits for on the FIFO hold.
func releaseHold(t *testing.T, hold string) {
	t.Helper()
	f, err := os.OpenFile(hold, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("go\n"); err != nil && !errors.Is(err, syscall.EPIPE) {
		t.Fatal(err)
	}
}

// awaitGone waits until process pid has ended, polling the process table
// (it is not the test's child).
func awaitGone(t *testing.T, pid int) {
	t.Helper()
	ctx := progresstest.Context(t)
	for agent.Alive(pid) {
		select {
		case <-ctx.Done():
			t.Fatalf("process %d is still alive", pid)
		case <-time.After(5 * time.Millisecond): // polling another process's state
		}
	}
}

// callRunner makes the call an agent of run asg makes on the runner's
// socket path (agentqueued agent progress), waiting until the runner
// listens there.
func callRunner(t *testing.T, path string, asg models.RunnerAssignment) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	defer hc.CloseIdleConnections()
	ctx := progresstest.Context(t)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://runner"+api.RPCPrefix+"/progress",
			strings.NewReader(`{"message":"half way"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+asg.Token)
		req.Header.Set(api.HeaderTaskID, asg.Task.ID)
		resp, err := hc.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("the call: %s %s", resp.Status, body)
			}
			return
		}
		if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("the call: %v", err)
		}
		select { // the runner is starting: its socket comes
		case <-ctx.Done():
			t.Fatalf("the runner does not listen on %s: %v", path, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}
