package runner

import (
	"net/url"
	"reflect"
	"testing"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
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
