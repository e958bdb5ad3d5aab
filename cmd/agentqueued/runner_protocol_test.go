package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// handRunner is a runner driven by hand over the real protocol: the test
// says what it reports.
type handRunner struct {
	t      *testing.T
	addr   string
	token  string
	client *api.Client
}

func newHandRunner(t *testing.T, addr, name string, addArgs ...string) *handRunner {
	t.Helper()
	var added api.RunnerAdded
	if err := json.Unmarshal([]byte(mustCtl(t, addr, append([]string{"--json", "runner", "add", name}, addArgs...)...)), &added); err != nil {
		t.Fatal(err)
	}
	c, err := api.NewClient("http://"+addr, added.Token, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	h := &handRunner{t: t, addr: addr, token: added.Token, client: c}
	if _, err := c.RunnerHello(context.Background(), models.RunnerHello{Name: name, Version: "hand",
		Agents: []models.RunnerAgent{{Name: "a", AgentType: "command"}}}); err != nil {
		t.Fatal(err)
	}
	return h
}

// startPlainDaemon starts a daemon with its data under dir and a project
// "plain" without a repository, and returns an API client of it.
func startPlainDaemon(t *testing.T, dir string) (*daemon, *api.Client) {
	t.Helper()
	d := startDaemon(t, filepath.Join(dir, "data"))
	admin, err := api.NewClient("http://"+d.m.Addr(), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateProject(d.watch.Context(), models.ProjectSpec{ID: "plain"}.Project()); err != nil {
		t.Fatal(err)
	}
	return d, admin
}

// nextRuns polls until an answer gives runs and returns them (an answer
// may be empty: a wake-up whose news an earlier poll already carried);
// nil, with the test failed, when a poll fails.
func (h *handRunner) nextRuns(ctx context.Context) []models.RunnerAssignment {
	h.t.Helper()
	for {
		poll, err := h.client.RunnerPoll(ctx)
		if err != nil {
			h.t.Error(err)
			return nil
		}
		if len(poll.Runs) > 0 {
			return poll.Runs
		}
	}
}

// raw posts body to path with the runner's token and the run's, and
// returns the status and the answer.
func (h *handRunner) raw(path, runToken, contentType string, body io.Reader) (int, string) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+h.addr+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.token)
	req.Header.Set(api.HeaderRunToken, runToken)
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// The runner protocol refuses what a broken or hostile runner sends, with
// a clear error, and applies nothing twice: a report for a run the runner
// does not hold, a wrong run token, a replayed report, one out of order,
// malformed ones, a log burst beyond its cap; the daemon answers the API
// throughout, also while a runner never reads its connection.
func TestRunnerProtocolRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, admin := startPlainDaemon(t, dir)
	addr := d.m.Addr()
	ctx := d.watch.Context()
	one := newHandRunner(t, addr, "one")
	two := newHandRunner(t, addr, "two")
	id := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "plain", "--title", "Hand work"))[0]

	// Whichever runner was offered the task is the holder.
	asg, holder, other := models.RunnerAssignment{}, one, two
	offered := make(chan models.RunnerAssignment, 2)
	for _, h := range []*handRunner{one, two} {
		go func() {
			poll, err := h.client.RunnerPoll(ctx)
			if err == nil && len(poll.Runs) > 0 {
				poll.Runs[0].Agent = h.token // which runner: read back below
				offered <- poll.Runs[0]
			}
		}()
	}
	asg = <-offered
	if asg.Agent == two.token {
		holder, other = two, one
	}
	if asg.Task.ID != id || asg.Token == "" {
		t.Fatalf("offered %+v", asg)
	}
	path := fmt.Sprintf("/runner/v1/runs/%d/reports", asg.RunID)
	report := func(h *handRunner, token string, rep models.RunnerReport) (int, string) {
		t.Helper()
		body, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		return h.raw(path, token, "application/json", bytes.NewReader(body))
	}
	prepared := models.RunnerReport{Seq: 1, Kind: models.ReportPrepared, Prepared: &models.Workspace{Dir: "/work/a"}}
	started := models.RunnerReport{Seq: 2, Kind: models.ReportStarted}
	progress := models.RunnerReport{Seq: 3, Kind: models.ReportRPC, Tool: "progress", Body: json.RawMessage(`{"message":"once"}`)}

	for _, tc := range []struct {
		name   string
		h      *handRunner
		token  string
		rep    models.RunnerReport
		status int
		msg    string
	}{
		{"another runner's run", other, asg.Token, prepared, 409, "is not this runner's"},
		{"a wrong run token", holder, "aqrun_wrong", prepared, 409, "it ended or its token is wrong"},
		{"no seq", holder, asg.Token, models.RunnerReport{Kind: models.ReportStarted}, 400, "seq: reports are numbered from 1"},
		{"an unknown kind", holder, asg.Token, models.RunnerReport{Seq: 1, Kind: "reboot"}, 400, "is not a report kind"},
		{"out of order", holder, asg.Token, started, 409, "is out of order: the next is 1"},
		{"prepared without a checkout", holder, asg.Token, models.RunnerReport{Seq: 1, Kind: models.ReportPrepared}, 400,
			"give either the checkout or prepare_error"},
	} {
		if status, body := report(tc.h, tc.token, tc.rep); status != tc.status || !strings.Contains(body, tc.msg) {
			t.Errorf("%s: %d %s, want %d %q", tc.name, status, body, tc.status, tc.msg)
		}
	}
	if status, body := holder.raw(path, asg.Token, "application/json", strings.NewReader(`{"seq":1,"kind":`)); status != 400 {
		t.Errorf("a truncated report: %d %s", status, body)
	}

	// The good reports, each sent twice: the second is answered as the
	// first and applied once.
	var launch string
	for _, rep := range []models.RunnerReport{prepared, started, progress} {
		var answers [2]string
		for i := range answers {
			status, body := report(holder, asg.Token, rep)
			if status != 200 {
				t.Fatalf("report %d (%s), try %d: %d %s", rep.Seq, rep.Kind, i+1, status, body)
			}
			answers[i] = body
		}
		if answers[0] != answers[1] {
			t.Errorf("report %d answered %s, then %s", rep.Seq, answers[0], answers[1])
		}
		if rep.Kind == models.ReportPrepared {
			launch = answers[0]
		}
	}
	if !strings.Contains(launch, `"prompt":`) || !strings.Contains(launch, "Hand work") {
		t.Errorf("the launch: %s", launch)
	}
	// A report of an earlier number, after later ones, changes nothing.
	if status, body := report(holder, asg.Token, prepared); status != 200 || strings.Contains(body, "prompt") {
		t.Errorf("an old report again: %d %s", status, body)
	}
	// A relayed call the daemon refuses is answered with its refusal.
	status, body := report(holder, asg.Token, models.RunnerReport{Seq: 4, Kind: models.ReportRPC, Tool: "progress",
		Body: json.RawMessage(`{"nonsense":1}`)})
	var ans models.RunnerReportAnswer
	if status != 200 || json.Unmarshal([]byte(body), &ans) != nil || ans.Status != 400 ||
		!strings.Contains(string(ans.Answer), `unknown field`) {
		t.Errorf("a relayed call with a bad body: %d %s", status, body)
	}
	if status, body := report(holder, asg.Token, models.RunnerReport{Seq: 5, Kind: models.ReportRPC, Tool: "shell",
		Body: json.RawMessage(`{}`)}); status != 400 || !strings.Contains(body, `unknown tool \"shell\"`) {
		t.Errorf("a relayed call of an unknown tool: %d %s", status, body)
	}
	if status, body := report(holder, asg.Token, models.RunnerReport{Seq: 5, Kind: models.ReportEvents,
		Events: json.RawMessage(`{"not":"a list"}`)}); status != 400 || !strings.Contains(body, "events") {
		t.Errorf("events that are not a list: %d %s", status, body)
	}

	// The log: a chunk beyond the cap is refused whole; one sent twice is
	// written once.
	logPath := fmt.Sprintf("/runner/v1/runs/%d/log?offset=0", asg.RunID)
	if status, body := holder.raw(logPath, asg.Token, "application/octet-stream",
		io.LimitReader(zeroes{}, 100<<20)); status != http.StatusRequestEntityTooLarge {
		t.Errorf("100 MB of log in one burst: %d %s", status, body)
	}
	for range 2 {
		if status, body := holder.raw(logPath, asg.Token, "application/octet-stream", strings.NewReader("hello\n")); status != 200 ||
			!strings.Contains(body, `"have":6`) {
			t.Errorf("a log chunk: %d %s", status, body)
		}
	}
	if status, body := holder.raw(fmt.Sprintf("/runner/v1/runs/%d/log?offset=-3", asg.RunID), asg.Token,
		"application/octet-stream", strings.NewReader("x")); status != 400 || !strings.Contains(body, "offset") {
		t.Errorf("a negative offset: %d %s", status, body)
	}

	// A runner that never reads its connection: its poll's answer waits
	// in the socket; the daemon answers others meanwhile.
	conn, err := net.Dial("tcp", addr) // never read
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /runner/v1/poll HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", addr, other.token)
	if out := mustCtl(t, addr, "task", "show", id); !strings.Contains(out, "IN_PROGRESS") {
		t.Errorf("ctl task show while a runner does not read:\n%s", out)
	}

	// The end: completed with exit 0, the task goes on to verification
	// and completes (a project without a repository).
	if status, body := report(holder, asg.Token, models.RunnerReport{Seq: 5, Kind: models.ReportEnded,
		Ended: &models.RunnerEnded{ExitCode: 0, LogSize: 6}}); status != 200 {
		t.Fatalf("the end: %d %s", status, body)
	}
	for {
		det, err := admin.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if det.Task.Status == models.StatusCompleted {
			started, progressed := 0, 0
			for _, e := range det.Events {
				if e.Event == models.EventAgentStarted {
					started++
				}
			}
			data, err := os.ReadFile(filepath.Join(dir, "data", "runs", id, "1.log"))
			if err != nil {
				t.Fatal(err)
			}
			progressed = strings.Count(string(data), "[progress] once")
			if started != 1 || progressed != 1 || !strings.Contains(string(data), "hello\n") {
				t.Errorf("applied: %d starts, %d progress lines; log %q", started, progressed, data)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task %s is %s: %v", id, det.Task.Status, d.watch.Err())
		case <-time.After(50 * time.Millisecond): // polling the daemon's answers
		}
	}
	// The run is over: anything more about it is refused.
	if status, body := report(holder, asg.Token, models.RunnerReport{Seq: 6, Kind: models.ReportStarted}); status != 409 {
		t.Errorf("a report after the end: %d %s", status, body)
	}
}

// zeroes reads as an endless run of zero bytes.
type zeroes struct{}

func (zeroes) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A run offered to a runner is given to it once: its next polls, before
// it has reported anything about the run, are held rather than answered
// at once with the same offer (a runner preparing a checkout would spin
// through polls); a hello gives it everything not taken up again.
func TestRunnerIsGivenEachRunOnce(t *testing.T) {
	t.Parallel()
	d, _ := startPlainDaemon(t, t.TempDir())
	addr := d.m.Addr()
	ctx := d.watch.Context()
	h := newHandRunner(t, addr, "one")
	hello := func() {
		t.Helper()
		if _, err := h.client.RunnerHello(ctx, models.RunnerHello{Name: "one", Version: "hand",
			Agents: []models.RunnerAgent{{Name: "a", AgentType: "command"}, {Name: "b", AgentType: "command"}}}); err != nil {
			t.Fatal(err)
		}
	}
	hello()
	nextRuns := func() []models.RunnerAssignment { return h.nextRuns(ctx) }
	taskOf := func(runs []models.RunnerAssignment) []string {
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.Task.ID)
		}
		slices.Sort(ids)
		return ids
	}
	first := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "plain", "--title", "First"))[0]
	if got := taskOf(nextRuns()); !slices.Equal(got, []string{first}) {
		t.Fatalf("first offer: tasks %v, want [%s]", got, first)
	}
	// Not taken up yet (no heartbeat, no report): the next answer with
	// runs is the second task's only.
	next := make(chan []models.RunnerAssignment, 1)
	go func() { next <- nextRuns() }()
	second := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "plain", "--title", "Second"))[0]
	if got := taskOf(<-next); !slices.Equal(got, []string{second}) {
		t.Fatalf("the poll after the first offer: tasks %v, want only [%s]", got, second)
	}
	// A runner that says hello again (it lost an answer, or restarted) is
	// given both again.
	hello()
	want := []string{first, second}
	slices.Sort(want)
	if got := taskOf(nextRuns()); !slices.Equal(got, want) {
		t.Fatalf("after a hello: tasks %v, want %v", got, want)
	}
}

// A task's own runner labels (ctl task add --runner-label) keep it from
// runners without them: it waits, saying why, until a runner with the
// labels connects, which is offered it.
func TestTaskRunnerLabelsPlaceIt(t *testing.T) {
	t.Parallel()
	d, admin := startPlainDaemon(t, t.TempDir())
	addr := d.m.Addr()
	ctx := d.watch.Context()
	newHandRunner(t, addr, "plain-box", "--label", "linux") // connected, idle, without gpu
	id := taskIDs(t, mustCtl(t, addr, "task", "add", "--project", "plain", "--title", "Train", "--runner-label", "gpu",
		"--runner-label", "linux"))[0]
	if out := mustCtl(t, addr, "task", "show", id); !strings.Contains(out, "gpu, linux") {
		t.Errorf("ctl task show does not show the labels:\n%s", out)
	}
	// The unlabelled runner is not offered it: the task waits, saying why.
	want := "no agent on a runner labelled gpu, linux works on project plain"
	for {
		task, err := admin.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if task.Task.WaitingReason == want && task.Task.WaitingCode == models.WaitingRunnerLabels {
			break
		}
		d.watch.Observe("waiting reason " + task.Task.WaitingReason)
		select {
		case <-ctx.Done():
			t.Fatalf("task %s waits with %q, want %q: %v", id, task.Task.WaitingReason, want, d.watch.Err())
		case <-time.After(20 * time.Millisecond): // polling the daemon's answers
		}
	}
	// A runner with both labels is offered it at once.
	gpu := newHandRunner(t, addr, "gpu-box", "--label", "gpu,linux")
	if runs := gpu.nextRuns(ctx); len(runs) != 1 || runs[0].Task.ID != id {
		t.Fatalf("the labelled runner is offered %+v, want task %s", runs, id)
	}
	if task, err := admin.GetTask(ctx, id); err != nil || task.Task.AssignedAgentID == nil ||
		*task.Task.AssignedAgentID != "gpu-box/a" {
		t.Fatalf("the task is assigned to %v (%v), want gpu-box/a", task.Task.AssignedAgentID, err)
	}
}
