package api_test

import (
	"context"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

func TestProgressCountsThroughTheRPC(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, api.RPCConfig{})
	ctx := context.Background()
	res, err := e.st.CreateTasks(ctx, models.TaskBatch{ProjectID: "web", Tasks: []models.BatchTask{
		{Title: "ingest", Kind: "ingest", ExpectedCount: 50}}})
	if err != nil {
		t.Fatal(err)
	}
	id := res[0].TaskID
	if _, err := e.st.RegisterAgent(ctx, models.Agent{ID: "a1", AgentType: "command",
		AgentSettings: models.AgentSettings{Command: "/bin/true"}}); err != nil {
		t.Fatal(err)
	}
	run, token, err := e.st.ClaimTask(ctx, id, "a1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.StartRun(ctx, run.ID, 4242, "/work/a1"); err != nil {
		t.Fatal(err)
	}
	c := e.client(id, token)
	n := func(v int) *int { return &v }
	for _, tc := range []struct {
		name             string
		p                models.TaskProgress
		wantOK, wantFail int
		code             models.ErrorCode
		msg              string
	}{
		{"counts with a message", models.TaskProgress{Message: "first batch", Succeeded: n(10), Failed: n(1)}, 10, 1, "", ""},
		{"counts alone", models.TaskProgress{Succeeded: n(20)}, 20, 1, "", ""},
		{"negative", models.TaskProgress{Failed: n(-1)}, 20, 1, models.CodeInvalid, "failed: must be between 0 and"},
		{"beyond expected_count", models.TaskProgress{Succeeded: n(45), Failed: n(6)}, 20, 1, models.CodeInvalid,
			"succeeded + failed: 45 + 6 = 51 exceeds the task's expected_count 50"},
		{"neither message nor counts", models.TaskProgress{}, 20, 1, models.CodeInvalid, "message: required"},
	} {
		err := c.ReportProgress(ctx, tc.p)
		if tc.code != "" {
			wantErr(t, err, tc.code, tc.msg)
		} else if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		task, err := e.st.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if task.SuccessCount != tc.wantOK || task.FailureCount != tc.wantFail {
			t.Fatalf("%s: stored %d/%d, want %d/%d", tc.name, task.SuccessCount, task.FailureCount, tc.wantOK, tc.wantFail)
		}
	}
	// The raw body an agent sends without the client.
	status, body := e.raw("POST", "/rpc/v1/progress", `{"succeeded": 30, "failed": 2}`, "Authorization", "Bearer "+token,
		"X-AQ-Task-ID", id)
	if status != 200 {
		t.Fatalf("raw progress: %d %s", status, body)
	}
	if task, _ := e.st.GetTask(ctx, id); task.SuccessCount != 30 || task.FailureCount != 2 {
		t.Fatalf("after the raw call: %d/%d", task.SuccessCount, task.FailureCount)
	}
}
