package statemachine_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/statemachine"
)

// pair is one (status, event) input of the transition table.
type pair struct {
	from  models.TaskStatus
	event models.TaskEvent
}

// expected is the transition table written out by hand from the
// specification, one block per source status. It deliberately does not come
// from statemachine.Rows, so that a change to the table has to be made twice.
var expected = map[pair]models.TaskStatus{
	// DEFINED
	{"DEFINED", "DEPS_MET"}:        "READY",
	{"DEFINED", "ADMIN_RESTART"}:   "READY",
	{"DEFINED", "UPSTREAM_FAILED"}: "BLOCKED", // extension

	// READY
	{"READY", "ASSIGNED"}:   "ASSIGNED",
	{"READY", "DEPS_ADDED"}: "DEFINED",

	// ASSIGNED
	{"ASSIGNED", "AGENT_STARTED"}:   "IN_PROGRESS",
	{"ASSIGNED", "EXECUTION_ERROR"}: "READY",
	{"ASSIGNED", "RECOVERY"}:        "READY",
	{"ASSIGNED", "TIMEOUT"}:         "BLOCKED",
	{"ASSIGNED", "TIMEOUT_FAILED"}:  "FAILED", // extension: a time limit counts as a failure
	{"ASSIGNED", "ADMIN_RESTART"}:   "READY",

	// IN_PROGRESS
	{"IN_PROGRESS", "AGENT_COMPLETED"}:  "VERIFYING",
	{"IN_PROGRESS", "AGENT_FAILED"}:     "FAILED",
	{"IN_PROGRESS", "TOKENS_EXHAUSTED"}: "PAUSED",
	{"IN_PROGRESS", "AGENT_QUESTION"}:   "WAITING_INPUT",
	{"IN_PROGRESS", "TIMEOUT"}:          "BLOCKED",
	{"IN_PROGRESS", "TIMEOUT_FAILED"}:   "FAILED", // extension: a time limit counts as a failure
	{"IN_PROGRESS", "ADMIN_STOP"}:       "BLOCKED",
	{"IN_PROGRESS", "MAX_RETRIES"}:      "BLOCKED",
	{"IN_PROGRESS", "RETRY"}:            "READY",
	{"IN_PROGRESS", "RECOVERY"}:         "READY",

	// VERIFYING
	{"VERIFYING", "VERIFY_PASSED"}: "COMPLETED",
	{"VERIFYING", "PR_CREATED"}:    "AWAITING_APPROVAL",
	{"VERIFYING", "VERIFY_FAILED"}: "FAILED",
	{"VERIFYING", "ADMIN_RESTART"}: "READY",

	// AWAITING_APPROVAL
	{"AWAITING_APPROVAL", "PR_MERGED"}:      "COMPLETED",
	{"AWAITING_APPROVAL", "PR_CLOSED"}:      "BLOCKED",
	{"AWAITING_APPROVAL", "ADMIN_RESTART"}:  "READY",
	{"AWAITING_APPROVAL", "HUMAN_APPROVED"}: "COMPLETED", // extension

	// FAILED
	{"FAILED", "RETRY"}:         "READY",
	{"FAILED", "MAX_RETRIES"}:   "BLOCKED",
	{"FAILED", "ADMIN_SKIP"}:    "COMPLETED",
	{"FAILED", "ADMIN_RESTART"}: "READY",

	// PAUSED
	{"PAUSED", "RESUME_TIMER"}:  "READY",
	{"PAUSED", "ADMIN_RESTART"}: "READY",

	// WAITING_INPUT
	{"WAITING_INPUT", "HUMAN_REPLIED"}: "IN_PROGRESS",
	{"WAITING_INPUT", "INPUT_TIMEOUT"}: "PAUSED",
	{"WAITING_INPUT", "ADMIN_RESTART"}: "READY",
	// a question answered after its run ended; one that expired
	{"WAITING_INPUT", "REPLY_REQUEUED"}: "READY",
	{"WAITING_INPUT", "TIMEOUT_FAILED"}: "FAILED",
	{"WAITING_INPUT", "MAX_RETRIES"}:    "BLOCKED",

	// BLOCKED
	{"BLOCKED", "ADMIN_RESTART"}:        "READY",
	{"BLOCKED", "ADMIN_SKIP"}:           "COMPLETED",
	{"BLOCKED", "UPSTREAM_REOPENED"}:    "DEFINED",           // extension
	{"VERIFYING", "HUMAN_APPROVED"}:     "COMPLETED",         // extension: HUMAN verification
	{"VERIFYING", "APPROVAL_REQUESTED"}: "AWAITING_APPROVAL", // extension: plan approval

	// Extension: a workflow run stops its unfinished tasks.
	{"DEFINED", "RUN_STOPPED"}:           "BLOCKED",
	{"READY", "RUN_STOPPED"}:             "BLOCKED",
	{"ASSIGNED", "RUN_STOPPED"}:          "BLOCKED",
	{"IN_PROGRESS", "RUN_STOPPED"}:       "BLOCKED",
	{"WAITING_INPUT", "RUN_STOPPED"}:     "BLOCKED",
	{"PAUSED", "RUN_STOPPED"}:            "BLOCKED",
	{"VERIFYING", "RUN_STOPPED"}:         "BLOCKED",
	{"AWAITING_APPROVAL", "RUN_STOPPED"}: "BLOCKED",
	{"FAILED", "RUN_STOPPED"}:            "BLOCKED",
	{"VERIFYING", "PR_UNAVAILABLE"}:      "BLOCKED", // extension: no way to open a PR

	// Extension: a person cancels an unfinished task.
	{"DEFINED", "ADMIN_CANCEL"}:           "BLOCKED",
	{"READY", "ADMIN_CANCEL"}:             "BLOCKED",
	{"ASSIGNED", "ADMIN_CANCEL"}:          "BLOCKED",
	{"IN_PROGRESS", "ADMIN_CANCEL"}:       "BLOCKED",
	{"WAITING_INPUT", "ADMIN_CANCEL"}:     "BLOCKED",
	{"PAUSED", "ADMIN_CANCEL"}:            "BLOCKED",
	{"VERIFYING", "ADMIN_CANCEL"}:         "BLOCKED",
	{"AWAITING_APPROVAL", "ADMIN_CANCEL"}: "BLOCKED",
	{"FAILED", "ADMIN_CANCEL"}:            "BLOCKED",

	// COMPLETED
	{"COMPLETED", "ADMIN_RESTART"}: "READY",
}

// expectedRows is the number of rows in expected: the specification's 36 rows
// plus the extensions. It guards the hand-written table itself.
const expectedRows = 66

func TestExpectedTableIsWellFormed(t *testing.T) {
	t.Parallel()
	if len(expected) != expectedRows {
		t.Fatalf("expected table has %d rows, want %d", len(expected), expectedRows)
	}
	for p, to := range expected {
		if !p.from.Valid() || !p.event.Valid() || !to.Valid() {
			t.Errorf("expected row (%s, %s) -> %s names an unknown status or event", p.from, p.event, to)
		}
	}
}

func TestEnumSizes(t *testing.T) {
	t.Parallel()
	if got := len(models.TaskStatuses); got != 11 {
		t.Errorf("len(TaskStatuses) = %d, want 11", got)
	}
	if got := len(models.TaskEvents); got != 33 {
		t.Errorf("len(TaskEvents) = %d, want 33", got)
	}
}

// checkInvalid asserts that err reports the pair (state, event) as an
// invalid transition with the exact message.
func checkInvalid(t *testing.T, to models.TaskStatus, err error,
	state models.TaskStatus, event models.TaskEvent) {
	t.Helper()
	if to != "" {
		t.Errorf("TaskTransition(%s, %s) status = %q, want empty", state, event, to)
	}
	var ite *statemachine.InvalidTransitionError
	if !errors.As(err, &ite) {
		t.Fatalf("TaskTransition(%s, %s) error = %v (%T), want *InvalidTransitionError",
			state, event, err, err)
	}
	if ite.State != state || ite.Event != event {
		t.Errorf("InvalidTransitionError = {%q, %q}, want {%q, %q}", ite.State, ite.Event, state, event)
	}
	want := fmt.Sprintf("Invalid transition: (%s, %s)", state, event)
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// checkValid asserts that the transition succeeded with status want.
func checkValid(t *testing.T, got models.TaskStatus, err error,
	from models.TaskStatus, event models.TaskEvent, want models.TaskStatus) {
	t.Helper()
	if err != nil {
		t.Fatalf("TaskTransition(%s, %s) error = %v, want nil", from, event, err)
	}
	if got != want {
		t.Errorf("TaskTransition(%s, %s) = %s, want %s", from, event, got, want)
	}
}

func TestTaskTransitionAllPairs(t *testing.T) {
	t.Parallel()
	seen := 0
	for _, from := range models.TaskStatuses {
		for _, event := range models.TaskEvents {
			want, ok := expected[pair{from, event}]
			if ok {
				seen++
			}
			t.Run(string(from)+"/"+string(event), func(t *testing.T) {
				t.Parallel()
				got, err := statemachine.TaskTransition(from, event)
				if ok {
					checkValid(t, got, err, from, event, want)
				} else {
					checkInvalid(t, got, err, from, event)
				}
			})
		}
	}
	if seen != len(expected) {
		t.Errorf("the status × event grid covers %d expected rows, want %d", seen, len(expected))
	}
}

func TestTaskTransitionUnknownNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		state models.TaskStatus
		event models.TaskEvent
	}{
		{"unknown status", "DONE", models.EventAdminRestart},
		{"unknown event", models.StatusDefined, "FINISH"},
		{"both unknown", "DONE", "FINISH"},
		{"empty status", "", models.EventDepsMet},
		{"empty event", models.StatusReady, ""},
		{"lower-case status", "defined", models.EventDepsMet},
		{"lower-case event", models.StatusDefined, "deps_met"},
		{"status used as event", models.StatusReady, "READY"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := statemachine.TaskTransition(tc.state, tc.event)
			checkInvalid(t, got, err, tc.state, tc.event)
		})
	}
}

func TestTaskTransitionNamedCases(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		from  models.TaskStatus
		event models.TaskEvent
		want  models.TaskStatus // empty: invalid
	}{
		{"restart an assigned task", models.StatusAssigned, models.EventAdminRestart, models.StatusReady},
		{"running task must be stopped before restart", models.StatusInProgress, models.EventAdminRestart, ""},
		{"stop then restart: stop", models.StatusInProgress, models.EventAdminStop, models.StatusBlocked},
		{"stop then restart: restart", models.StatusBlocked, models.EventAdminRestart, models.StatusReady},
		{"ready task has no restart row", models.StatusReady, models.EventAdminRestart, ""},
		{"event name equal to a status", models.StatusDefined, models.EventAssigned, ""},
		{"human approval completes", "AWAITING_APPROVAL", "HUMAN_APPROVED", "COMPLETED"},
		{"human approval needs AWAITING_APPROVAL or VERIFYING", models.StatusInProgress, models.EventHumanApproved, ""},
		{"upstream failure blocks a defined task", "DEFINED", "UPSTREAM_FAILED", "BLOCKED"},
		{"upstream failure does not touch a ready task", models.StatusReady, models.EventUpstreamFailed, ""},
		{"reopened upstream re-evaluates", "BLOCKED", "UPSTREAM_REOPENED", "DEFINED"},
		{"reopened upstream needs BLOCKED", models.StatusCompleted, models.EventUpstreamReopened, ""},
		{"a new dependency returns a ready task to waiting", models.StatusReady, models.EventDepsAdded, models.StatusDefined},
		{"a new dependency does not touch a failed task", models.StatusFailed, models.EventDepsAdded, ""},
		{"completed cannot be skipped", models.StatusCompleted, models.EventAdminSkip, ""},
		{"paused task cannot start directly", models.StatusPaused, models.EventAgentStarted, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := statemachine.TaskTransition(tc.from, tc.event)
			if tc.want == "" {
				checkInvalid(t, got, err, tc.from, tc.event)
			} else {
				checkValid(t, got, err, tc.from, tc.event, tc.want)
			}
		})
	}
}

func TestInvalidTransitionMessage(t *testing.T) {
	t.Parallel()
	_, err := statemachine.TaskTransition("DEFINED", "ASSIGNED")
	if err == nil {
		t.Fatal("TaskTransition(DEFINED, ASSIGNED) succeeded")
	}
	if got, want := err.Error(), "Invalid transition: (DEFINED, ASSIGNED)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	direct := &statemachine.InvalidTransitionError{State: "PAUSED", Event: "PR_MERGED"}
	if got, want := direct.Error(), "Invalid transition: (PAUSED, PR_MERGED)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("apply: %w", err)
	var ite *statemachine.InvalidTransitionError
	if !errors.As(wrapped, &ite) || ite.State != "DEFINED" || ite.Event != "ASSIGNED" {
		t.Errorf("errors.As through a wrap = %v, %+v", errors.As(wrapped, &ite), ite)
	}
}

// TestAdminRestart checks which statuses accept ADMIN_RESTART: every status
// except READY (which is where a restart leads) and IN_PROGRESS (which must
// be stopped first).
func TestAdminRestart(t *testing.T) {
	t.Parallel()
	without := map[models.TaskStatus]bool{}
	for _, s := range models.TaskStatuses {
		to, err := statemachine.TaskTransition(s, models.EventAdminRestart)
		switch {
		case err != nil:
			without[s] = true
		case to != models.StatusReady:
			t.Errorf("ADMIN_RESTART from %s leads to %s, want READY", s, to)
		}
	}
	want := map[models.TaskStatus]bool{models.StatusReady: true, models.StatusInProgress: true}
	if len(without) != len(want) {
		t.Errorf("statuses without ADMIN_RESTART = %v, want %v", without, want)
	}
	for s := range want {
		if !without[s] {
			t.Errorf("%s accepts ADMIN_RESTART, want it refused", s)
		}
	}
}

func TestRowsMatchesExpected(t *testing.T) {
	t.Parallel()
	rows := statemachine.Rows()
	if len(rows) != len(expected) {
		t.Fatalf("len(Rows()) = %d, want %d", len(rows), len(expected))
	}
	seen := map[pair]bool{}
	for _, r := range rows {
		p := pair{r.From, r.Event}
		if seen[p] {
			t.Errorf("Rows() repeats (%s, %s)", r.From, r.Event)
		}
		seen[p] = true
		want, ok := expected[p]
		switch {
		case !ok:
			t.Errorf("Rows() has unexpected row (%s, %s) -> %s", r.From, r.Event, r.To)
		case r.To != want:
			t.Errorf("Rows() row (%s, %s) -> %s, want %s", r.From, r.Event, r.To, want)
		}
	}
	for p, to := range expected {
		if !seen[p] {
			t.Errorf("Rows() lacks (%s, %s) -> %s", p.from, p.event, to)
		}
	}
}

func TestRowsReturnsCopy(t *testing.T) {
	t.Parallel()
	rows := statemachine.Rows()
	if len(rows) == 0 {
		t.Fatal("Rows() is empty")
	}
	orig := rows[0]
	for i := range rows {
		rows[i].To = "MUTATED"
		rows[i].Event = "MUTATED"
	}
	rows = rows[:0]
	_ = append(rows, statemachine.Row{From: "X", Event: "Y", To: "Z"})

	again := statemachine.Rows()
	if len(again) != len(expected) {
		t.Fatalf("len(Rows()) after mutation = %d, want %d", len(again), len(expected))
	}
	if again[0] != orig {
		t.Errorf("Rows()[0] after mutation = %+v, want %+v", again[0], orig)
	}
	for p, want := range expected {
		got, err := statemachine.TaskTransition(p.from, p.event)
		if err != nil || got != want {
			t.Errorf("after mutating Rows(): TaskTransition(%s, %s) = %s, %v; want %s",
				p.from, p.event, got, err, want)
		}
	}
}

func TestIsValidStatusTransitionAllPairs(t *testing.T) {
	t.Parallel()
	valid := map[[2]models.TaskStatus]bool{}
	for p, to := range expected {
		valid[[2]models.TaskStatus{p.from, to}] = true
	}
	for _, from := range models.TaskStatuses {
		for _, to := range models.TaskStatuses {
			want := valid[[2]models.TaskStatus{from, to}]
			if got := statemachine.IsValidStatusTransition(from, to); got != want {
				t.Errorf("IsValidStatusTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
}

func TestIsValidStatusTransitionNamed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		from, to models.TaskStatus
		want     bool
	}{
		{models.StatusDefined, models.StatusReady, true},
		{models.StatusReady, models.StatusCompleted, false},
		{models.StatusBlocked, models.StatusDefined, true}, // UPSTREAM_REOPENED
		{models.StatusCompleted, models.StatusBlocked, false},
		{models.StatusDefined, models.StatusBlocked, true}, // UPSTREAM_FAILED
		{models.StatusAwaitingApproval, models.StatusCompleted, true},
		{models.StatusInProgress, models.StatusReady, true}, // RETRY, RECOVERY
		{models.StatusReady, models.StatusReady, false},
		{models.StatusInProgress, models.StatusInProgress, false},
		{models.StatusCompleted, models.StatusDefined, false},
		{"DONE", models.StatusReady, false},
		{models.StatusDefined, "DONE", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s->%s", tc.from, tc.to), func(t *testing.T) {
			t.Parallel()
			if got := statemachine.IsValidStatusTransition(tc.from, tc.to); got != tc.want {
				t.Errorf("IsValidStatusTransition(%s, %s) = %v, want %v", tc.from, tc.to, got, tc.want)
			}
		})
	}
}

// TestAdminCancel checks that ADMIN_CANCEL takes every unfinished status to
// BLOCKED and is refused from the two finished ones.
func TestAdminCancel(t *testing.T) {
	t.Parallel()
	for _, s := range models.TaskStatuses {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			to, err := statemachine.TaskTransition(s, models.EventAdminCancel)
			if s.Terminal() {
				checkInvalid(t, to, err, s, models.EventAdminCancel)
				return
			}
			checkValid(t, to, err, s, models.EventAdminCancel, models.StatusBlocked)
		})
	}
}
