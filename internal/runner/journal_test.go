package runner

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"sync"
	"testing"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/progresstest"
)

// A run's journal entry holds all its detached agent's next life needs:
// what is written is what is read back.
func TestJournalEntryRoundTrip(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse("http://127.0.0.1:7700")
	r, err := New(Config{Server: u, Token: "aqr_x", Agents: []models.RunnerAgent{{Name: "a0", AgentType: "command"}},
		DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	shim := agent.ShimID{PID: 4242, Start: 987654}
	files := agent.FilesIn("/data/runs/brave-otter/1.run")
	ws := models.Workspace{Dir: "/data/work/a0", Branch: "aq/brave-otter", Base: "0123abc"}
	launch := models.RunnerLaunch{Prompt: "do it\n", SessionID: "s-1", Env: map[string]string{"AQ_STEP": "build"}}
	asg := models.RunnerAssignment{RunID: 7, Token: "run-token", Agent: "a0", ProjectID: "p", Attempt: 1, Kind: "task",
		Task: models.Task{ID: "brave-otter"}}
	j := &job{r: r, asg: asg, seq: 5, kind: models.ReportEvents, started: true, pid: shim.PID, logPath: "/data/runs/x.log",
		logSent: 100, detached: true, shim: &shim, files: &files, ws: &ws, launched: &launch, socket: "/data/rpc.sock",
		saved: agent.Checkpoint{Stdout: 120, Stderr: 30, Log: 150}}
	j.save()
	got, err := readEntry(r.journalPath(7))
	if err != nil {
		t.Fatal(err)
	}
	want := journalEntry{Assignment: asg, Seq: 5, Kind: models.ReportEvents, Started: true, PID: shim.PID,
		LogPath: "/data/runs/x.log", LogSent: 100, Shim: &shim, Files: &files, Workspace: &ws, Launch: &launch,
		SocketPath: "/data/rpc.sock", Checkpoint: agent.Checkpoint{Stdout: 120, Stderr: 30, Log: 150}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("read back:\n%+v\nwant\n%+v", got, want)
	}
	if !got.reattachable() {
		t.Error("the entry is not reattachable")
	}
	j.forget()
	if _, err := readEntry(r.journalPath(7)); err == nil {
		t.Error("the entry is read after forget")
	}
}

// A restarted runner sends its earlier life's last report again: one the
// daemon had is answered as before; a started report goes as itself, any
// other as empty events; and a relayed ask the daemon holds for its
// answer (Pending) is not waited for — its caller died with the runner —
// where it used to hold the run's reports until someone answered.
func TestResyncSendsTheLastReportAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind, sent string
		pending    bool
	}{
		{models.ReportStarted, models.ReportStarted, false},
		{models.ReportEvents, models.ReportEvents, false},
		{models.ReportRPC, models.ReportEvents, true},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []models.RunnerReport
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var rep models.RunnerReport
				if err := json.NewDecoder(r.Body).Decode(&rep); err != nil {
					t.Error(err)
				}
				mu.Lock()
				got = append(got, rep)
				mu.Unlock()
				json.NewEncoder(w).Encode(models.RunnerReportAnswer{Pending: tc.pending}) //nolint:errcheck // the test reads it
			}))
			defer srv.Close()
			u, _ := url.Parse(srv.URL)
			r, err := New(Config{Server: u, Token: "aqr_x", Agents: []models.RunnerAgent{{Name: "a0", AgentType: "command"}}})
			if err != nil {
				t.Fatal(err)
			}
			j := &job{r: r, asg: models.RunnerAssignment{RunID: 7, Token: "t"}, seq: 4, kind: tc.kind,
				stop: make(chan struct{}), gone: make(chan struct{})}
			ctx, cancel := context.WithCancel(progresstest.Context(t))
			defer cancel()
			if err := j.resync(ctx); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 1 || got[0].Seq != 4 || got[0].Kind != tc.sent {
				t.Errorf("sent %+v, want report 4 as %s", got, tc.sent)
			}
			if want := tc.kind == models.ReportStarted; j.started != want {
				t.Errorf("started %v, want %v", j.started, want)
			}
		})
	}
}
