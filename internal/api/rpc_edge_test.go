package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestUsageReportIsBounded: two usage reports of 5e18 tokens once
// overflowed a project's total and stopped the daemon; a count above
// MaxUsageTokensPerReport is refused, naming the field and the cap, and
// nothing of the report is booked.
func TestUsageReportIsBounded(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, api.RPCConfig{})
	ctx := context.Background()
	run, token := e.startRun("Count tokens")
	c := e.client(run.TaskID, token)

	const huge = 5_000_000_000_000_000_000
	wantErr(t, c.Usage(ctx, api.UsageReport{Input: huge, Output: 1}), models.CodeInvalid,
		fmt.Sprintf("input_tokens: at most %d tokens in one report (got %d)", api.MaxUsageTokensPerReport, int64(huge)))
	wantErr(t, c.Usage(ctx, api.UsageReport{Input: huge, Output: huge}), models.CodeInvalid, "input_tokens: at most")
	for _, field := range []string{"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"} {
		body := fmt.Sprintf(`{"input_tokens":0,"output_tokens":0,%q:%d}`, field, int64(api.MaxUsageTokensPerReport)+1)
		if field == "input_tokens" || field == "output_tokens" {
			body = fmt.Sprintf(`{%q:%d}`, field, int64(api.MaxUsageTokensPerReport)+1)
		}
		status, answer := e.raw("POST", api.RPCPrefix+"/usage", body, "Authorization", "Bearer "+token,
			api.HeaderTaskID, run.TaskID, "Content-Type", "application/json")
		wantBody(t, status, answer, http.StatusBadRequest, models.CodeInvalid,
			fmt.Sprintf("%s: at most %d tokens in one report", field, api.MaxUsageTokensPerReport))
	}
	wantErr(t, c.Usage(ctx, api.UsageReport{Input: -1}), models.CodeInvalid, "input_tokens: must not be negative")
	if n, err := e.st.TokensUsedSince(ctx, "web", time.Time{}); err != nil || n != 0 {
		t.Fatalf("tokens booked by refused reports: %d, %v", n, err)
	}

	// The cap itself is accepted, and booked.
	if err := c.Usage(ctx, api.UsageReport{Input: api.MaxUsageTokensPerReport, Output: 1}); err != nil {
		t.Fatalf("a report at the cap: %v", err)
	}
	if n, err := e.st.TokensUsedSince(ctx, "web", time.Time{}); err != nil || n != api.MaxUsageTokensPerReport+1 {
		t.Fatalf("tokens booked: %d, %v; want %d", n, err, api.MaxUsageTokensPerReport+1)
	}
}

// TestRPCJSONKeysAreExact: the agent RPC decodes through the same helper
// as the HTTP API: a key in the wrong case or given twice is refused.
func TestRPCJSONKeysAreExact(t *testing.T) {
	t.Parallel()
	e := newRPCEnv(t, api.RPCConfig{})
	run, token := e.startRun("Strict")
	auth := []string{"Authorization", "Bearer " + token, api.HeaderTaskID, run.TaskID, "Content-Type", "application/json"}
	tests := []struct{ tool, body, msg string }{
		{"usage", `{"Input_Tokens":5,"output_tokens":1}`, `unknown field "Input_Tokens" (keys are case-sensitive: did you mean "input_tokens"?)`},
		{"usage", `{"input_tokens":1,"input_tokens":100}`, `duplicate key "input_tokens"`},
		{"progress", `{"message":"a","message":"b"}`, `duplicate key "message"`},
		{"complete", `{"summary":"done","outputs":{"k":1,"k":2}}`, `duplicate key "outputs.k"`},
		{"propose_plan", `{"tasks":[{"title":"a","Title":"b"}]}`, `unknown field "tasks[0].Title"`},
	}
	for _, tc := range tests {
		status, answer := e.raw("POST", api.RPCPrefix+"/"+tc.tool, tc.body, auth...)
		wantBody(t, status, answer, http.StatusBadRequest, models.CodeInvalid, tc.msg)
	}
	if n, err := e.st.TokensUsedSince(context.Background(), "web", time.Time{}); err != nil || n != 0 {
		t.Errorf("tokens booked by refused reports: %d, %v", n, err)
	}
	if d := e.task(run.TaskID); d.Task.Status != models.StatusInProgress {
		t.Errorf("task after refused calls: %s", d.Task.Status)
	}
}
