package models

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"
)

// sampleNotices builds one notice of every kind with its constructor.
func sampleNotices(t *testing.T) []Notice {
	t.Helper()
	change := TransitionNotice{TaskID: "brave-otter", ProjectID: "web", Title: "Fix <the> login", From: StatusInProgress,
		Event: EventAgentCompleted, Reason: "done & dusted", Actor: "agent-1"}
	var out []Notice
	for status := range statusNoticeKinds {
		c := change
		c.To = status
		n, ok := NewStatusNotice(c)
		if !ok {
			t.Fatalf("status %s: no notice", status)
		}
		out = append(out, n)
	}
	if _, ok := NewStatusNotice(TransitionNotice{To: StatusReady}); ok {
		t.Error("READY got a notice")
	}
	broken := change
	broken.To, broken.Event, broken.Blocked = StatusBlocked, EventUpstreamFailed, []string{"calm-heron", "shy-fox"}
	asked := time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC)
	return append(out,
		NewChainBrokenNotice(broken),
		NewQuestionNotice(Question{ID: 7, TaskID: "brave-otter", ProjectID: "web", RunID: 3, Text: "which colour?", AskedAt: asked}),
		NewProgressNotice("web", ProgressNotice{TaskID: "brave-otter", RunID: 3, Message: "reading", Source: "agent"}),
		NewApprovalNeededNotice("web", ApprovalNeededNotice{TaskID: "brave-otter", Title: "Fix", Files: []string{"a.go"}}),
		NewLandingWaitsNotice("web", LandingWaitsNotice{TaskID: "brave-otter", Title: "Fix", Reason: "main is dirty"}),
		NewTaskDeletedNotice(TaskDeletedNotice{TaskID: "brave-otter", ProjectID: "web", Title: "Fix", Status: StatusFailed}),
		NewPlanFailedNotice("web", PlanFailedNotice{TaskID: "brave-otter", PlanID: 4, Error: "tasks[1].title: required"}),
		NewRunEndedNotice(RunEndedNotice{RunID: "nightly-3", Workflow: "nightly", ProjectID: "web", Status: RunSuccess}),
		NewRunEndedNotice(RunEndedNotice{RunID: "nightly-4", Workflow: "nightly", ProjectID: "web", Status: RunFailed, Reason: "x"}),
		NewRunEndedNotice(RunEndedNotice{RunID: "nightly-5", Workflow: "nightly", ProjectID: "web", Status: RunCancelled,
			Reason: "cancelled by discord:1"}),
		NewHookMessageNotice(HookMessage{HookID: "triage", HookName: "Triage", RunID: "triage.1", ProjectID: "web", Text: "hi"}),
		NewDeskEscalationNotice(DeskEscalationNotice{ProjectID: "web", Channel: "123", Role: "456", Waited: Duration(time.Hour),
			Item: DeskItem{Key: "question:7", Kind: DeskQuestion, ProjectID: "web", TaskID: "brave-otter", Title: "Fix",
				What: "which colour?", Since: asked, QuestionID: 7, Action: DeskAction{Command: "agentqueued ctl question answer 7 ANSWER..."}}}),
		NewDeskDigestNotice(DeskDigestNotice{ProjectID: "web", Count: 2, Oldest: asked, At: asked.Add(time.Hour),
			Items: []DeskItem{{Key: "question:7", Kind: DeskQuestion, ProjectID: "web", Since: asked}}}),
	)
}

func TestEveryNoticeKindRoundTrips(t *testing.T) {
	t.Parallel()
	seen := map[NoticeKind]bool{}
	for _, n := range sampleNotices(t) {
		t.Run(string(n.Kind), func(t *testing.T) {
			seen[n.Kind] = true
			if !n.Kind.Known() {
				t.Fatalf("constructor made unknown kind %q", n.Kind)
			}
			payload, err := n.Encode()
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeNotice(n.Kind, payload)
			if err != nil {
				t.Fatal(err)
			}
			if got.Kind != n.Kind || !reflect.DeepEqual(got.Payload, n.Payload) {
				t.Errorf("decoded %#v, want %#v", got, n)
			}
			// The payload names the row's project and task where it has them.
			if got.ProjectID != "" && got.ProjectID != n.ProjectID || got.TaskID != "" && got.TaskID != n.TaskID {
				t.Errorf("decoded scope %q/%q, written %q/%q", got.ProjectID, got.TaskID, n.ProjectID, n.TaskID)
			}
			if _, err := DecodeNotice(n.Kind, `"not an object"`); err == nil {
				t.Error("a payload that is not an object decoded")
			}
		})
	}
	for _, k := range NoticeKinds() {
		if !seen[k] {
			t.Errorf("kind %s has no constructor in the table", k)
		}
	}
}

// TestNoticePayloadsKeepTheirJSON pins the payloads' JSON, byte for byte,
// to what the outbox holds from before the payloads were typed (maps,
// whose keys marshal sorted, and the structs of that time).
func TestNoticePayloadsKeepTheirJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		n    Notice
		want any
	}{
		{"progress", NewProgressNotice("web", ProgressNotice{TaskID: "a", RunID: 3, Message: "m <b>"}),
			map[string]any{"task_id": "a", "run_id": int64(3), "message": "m <b>"}},
		{"agent progress", NewProgressNotice("web", ProgressNotice{TaskID: "a", RunID: 3, Message: "m", Source: "agent"}),
			map[string]any{"task_id": "a", "run_id": int64(3), "message": "m", "source": "agent"}},
		{"approval", NewApprovalNeededNotice("web", ApprovalNeededNotice{TaskID: "a", Title: "t"}),
			map[string]any{"task_id": "a", "title": "t", "files": []string(nil)}},
		{"landing", NewLandingWaitsNotice("web", LandingWaitsNotice{TaskID: "a", Title: "t", Reason: "r"}),
			map[string]any{"task_id": "a", "title": "t", "reason": "r"}},
		{"plan", NewPlanFailedNotice("web", PlanFailedNotice{TaskID: "a", PlanID: 2, Error: "e"}),
			map[string]any{"task_id": "a", "plan_id": int64(2), "error": "e"}},
		{"run", NewRunEndedNotice(RunEndedNotice{RunID: "r-1", Workflow: "w", ProjectID: "web", Status: RunCancelled, Reason: "why"}),
			map[string]any{"run_id": "r-1", "workflow": "w", "project_id": "web", "status": RunCancelled, "reason": "why"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.n.Encode()
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(c.want)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("payload\n %s\nwant\n %s", got, want)
			}
		})
	}
	literal := []struct {
		name string
		n    Notice
		want string
	}{
		{"transition", NewChainBrokenNotice(TransitionNotice{TaskID: "a", ProjectID: "web", Title: "t", From: StatusDefined,
			To: StatusBlocked, Event: EventUpstreamFailed, Blocked: []string{"b"}}),
			`{"task_id":"a","project_id":"web","title":"t","from":"DEFINED","to":"BLOCKED","event":"UPSTREAM_FAILED","blocked":["b"]}`},
		{"deleted", NewTaskDeletedNotice(TaskDeletedNotice{TaskID: "a", ProjectID: "web", Title: "t", Status: StatusReady}),
			`{"task_id":"a","project_id":"web","title":"t","status":"READY"}`},
		{"hook", NewHookMessageNotice(HookMessage{HookID: "h", HookName: "H", RunID: "h.1", ProjectID: "web", Text: "x"}),
			`{"hook_id":"h","hook_name":"H","run_id":"h.1","project_id":"web","text":"x"}`},
	}
	for _, c := range literal {
		if got, err := c.n.Encode(); err != nil || got != c.want {
			t.Errorf("%s: payload %s (%v), want %s", c.name, got, err, c.want)
		}
	}
}

func TestNoticeKindSets(t *testing.T) {
	t.Parallel()
	var events []NoticeKind
	for _, k := range NoticeKinds() {
		if k.TaskEvent() {
			events = append(events, k)
		}
	}
	// The hook event types that are notices (pr.merged and pr.closed are
	// derived from task.completed and task.blocked).
	var want []NoticeKind
	for _, e := range HookEventTypes {
		if k := NoticeKind(e); k.Known() {
			want = append(want, k)
		}
	}
	slices.Sort(want)
	if !slices.Equal(events, want) {
		t.Errorf("task event kinds %v, want %v", events, want)
	}
	for _, s := range []WorkflowRunStatus{RunPending, RunRunning} {
		if k := RunEndedNoticeKind(s); k != "" {
			t.Errorf("run status %s has kind %q", s, k)
		}
	}
	n, err := DecodeNotice("newer.kind", `{"task_id":"a","project_id":"web","x":1}`)
	if err != nil || n.TaskID != "a" || n.ProjectID != "web" || n.Payload != nil {
		t.Errorf("unknown kind decoded %+v, %v", n, err)
	}
	if _, err := DecodeNotice(NoticeHookMessage, `{"run_id": 7}`); err == nil {
		t.Error("a hook message with a numeric run id decoded")
	}
}
