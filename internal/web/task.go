package web

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/statemachine"
)

func init() {
	register(Page{Pattern: "GET " + Prefix + "/tasks/{id}", Template: "task", Nav: NavQueue, Load: (*Server).loadTask})
	registerAction(
		Action{Pattern: "POST " + Prefix + "/tasks/{id}/answer", Do: (*Server).answer},
		Action{Pattern: "POST " + Prefix + "/tasks/{id}/approve", Do: (*Server).approve},
		Action{Pattern: "POST " + Prefix + "/tasks/{id}/reject", Do: (*Server).reject},
		Action{Pattern: "POST " + Prefix + "/tasks/{id}/restart", Do: adminEvent(models.EventAdminRestart, "restarted")},
		Action{Pattern: "POST " + Prefix + "/tasks/{id}/skip", Do: adminEvent(models.EventAdminSkip, "skipped")},
		Action{Pattern: "POST " + Prefix + "/tasks/{id}/cancel", Do: adminEvent(models.EventAdminCancel, "cancelled")},
		Action{Pattern: "POST " + Prefix + "/tasks/{id}/priority", Do: (*Server).editPriority},
		Action{Pattern: "POST " + Prefix + "/tasks/{id}/agent-type", Do: (*Server).editAgentType},
		Action{Pattern: "POST " + Prefix + "/tasks/{id}/limits", Do: (*Server).editLimits},
	)
}

// Bounds of what a task's page reads.
const (
	// TaskLogTail is how much of the end of the current run's log a
	// task's page shows; the stream adds what follows.
	TaskLogTail = 64 << 10
	// MaxNeighbours bounds the upstreams and dependents whose title and
	// status a task's page reads (the others are listed by id).
	MaxNeighbours = 50
	// MaxDiffBytes bounds the diff shown.
	MaxDiffBytes = 512 << 10
)

// taskPage is the data of a task's page.
type taskPage struct {
	models.TaskDetail
	Upstreams  []neighbour
	Dependents []neighbour
	// Questions are the task's questions, open ones first.
	Questions []models.Question
	// Decision is set when a person's approval or rejection is awaited:
	// the diff is shown with the approve and reject forms.
	Decision bool
	Diff     string
	// DiffNote says why no diff is shown, or that it was cut.
	DiffNote  string
	RunErrors []string
	// Log is the end of the latest run's log; LogAttempt its attempt and
	// LogNext the offset after it, where the stream continues.
	Log        string
	LogAttempt int
	LogNext    int64
	LogCut     bool
	// Attempt is the task's current attempt (its latest run's), posted
	// back by the approve and reject forms so that a decision applies
	// only to the work the page showed.
	Attempt int
	// Can says which admin events the task's status allows.
	Can map[string]bool
	// Graph is the drawn neighbourhood of the task (graphs.go).
	Graph graphView
	// AgentTypes are the types the agent type form offers besides "any".
	AgentTypes []string
	// Editable is set when the task's status allows an edit (it is not
	// being worked on and has not completed): the "Limits and routing"
	// form is shown.
	Editable bool
	// Timeout and Metadata are the task's timeout and metadata as the
	// "Limits and routing" form shows them (formTimeout, formMetadata).
	Timeout  string
	Metadata string
}

// EventsURL follows the task's log besides the state changes.
func (p taskPage) EventsURL() string {
	v := url.Values{"task": {p.Task.ID}, "attempt": {strconv.Itoa(p.LogAttempt)}, "offset": {strconv.FormatInt(p.LogNext, 10)}}
	return Prefix + "/events?" + v.Encode()
}

// neighbour is an upstream or a dependent of a task with its edge.
type neighbour struct {
	ID     string
	Title  string
	Status models.TaskStatus
	// Known is false past MaxNeighbours: only the id is shown.
	Known           bool
	RequiresSuccess bool
	Resolution      models.EdgeResolution
	// RootCause marks the task whose failure blocked this one.
	RootCause bool
}

// loadTask reads a task's detail, its neighbours, questions, diff (when a
// decision is awaited), run errors and the end of its log.
func (s *Server) loadTask(r *http.Request) (any, error) {
	ctx := r.Context()
	id := r.PathValue("id")
	d, err := s.svc.GetTaskDetail(ctx, id)
	if err != nil {
		return nil, err
	}
	p := taskPage{TaskDetail: d, Attempt: currentAttempt(d), Can: map[string]bool{}, AgentTypes: models.AgentTypes,
		Editable: editable(d.Task.Status), Timeout: formTimeout(d.Task.Timeout), Metadata: formMetadata(d.Task.Metadata)}
	for _, e := range models.AdminEvents {
		if _, err := statemachine.TaskTransition(d.Task.Status, e); err == nil {
			p.Can[string(e)] = true
		}
	}
	read := 0
	neighbourOf := func(other string, dep models.Dependency) neighbour {
		n := neighbour{ID: other, RequiresSuccess: dep.RequiresSuccess, Resolution: dep.Resolution,
			RootCause: other == d.Task.CascadeRootID}
		if read < MaxNeighbours {
			read++
			if od, err := s.svc.GetTaskDetail(ctx, other); err == nil {
				n.Title, n.Status, n.Known = od.Task.Title, od.Task.Status, true
			}
		}
		return n
	}
	for _, dep := range d.Dependencies {
		p.Upstreams = append(p.Upstreams, neighbourOf(dep.Upstream, dep))
	}
	for _, dep := range d.Dependents {
		p.Dependents = append(p.Dependents, neighbourOf(dep.Downstream, dep))
	}
	if p.Graph, err = s.taskNeighbourhood(ctx, id, baseOf(r)); err != nil {
		return nil, err
	}
	qs, err := s.svc.TaskQuestions(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	for _, q := range qs {
		if q.Answer == nil && q.ClosedAt == nil {
			p.Questions = append(p.Questions, q)
		}
	}
	for _, q := range qs {
		if q.Answer != nil || q.ClosedAt != nil {
			p.Questions = append(p.Questions, q)
		}
	}
	p.Decision = d.Task.Status == models.StatusAwaitingApproval ||
		(d.Task.Status == models.StatusVerifying && d.Verification != nil && d.Verification.Phase == models.PhaseHuman)
	if p.Decision {
		diff, err := s.svc.TaskDiff(ctx, id)
		switch {
		case err != nil:
			_, p.DiffNote = s.describe(r, err)
		case diff == "":
			p.DiffNote = "The task's branch changes nothing."
		case len(diff) > MaxDiffBytes:
			p.Diff, p.DiffNote = diff[:completeRunes(diff[:MaxDiffBytes])], fmt.Sprintf("The diff is cut at %d KiB.", MaxDiffBytes>>10)
		default:
			p.Diff = diff
		}
	}
	if p.RunErrors, err = s.svc.RunErrors(ctx, id); err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	c, err := s.svc.ReadTaskLog(ctx, id, 0, -TaskLogTail, TaskLogTail)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", id, err)
	}
	p.LogCut = c.Next > int64(len(c.Data))
	if p.LogCut { // the tail may begin inside a character: from the next one
		c.Data = c.Data[partialRunes(c.Data):]
	}
	if n := completeRunes(c.Data); n < len(c.Data) { // the stream brings the rest
		c.Next -= int64(len(c.Data) - n)
		c.Data = c.Data[:n]
	}
	p.Log, p.LogAttempt, p.LogNext = c.Data, c.Attempt, c.Next
	return p, nil
}

// taskPath is the page of the task the request names.
func taskPath(r *http.Request) string { return Prefix + "/tasks/" + url.PathEscape(r.PathValue("id")) }

// answer answers one of the task's questions (fields question, answer).
func (s *Server) answer(r *http.Request) (string, string, error) {
	qid, err := strconv.ParseInt(r.PostFormValue("question"), 10, 64)
	if err != nil || qid <= 0 {
		return "", taskPath(r), models.Errorf(models.CodeInvalid, "question: not a question number")
	}
	// The question must be the task's: a form is not to answer another
	// task's question under this one's page.
	qs, err := s.svc.TaskQuestions(r.Context(), r.PathValue("id"))
	if err != nil {
		return "", taskPath(r), err
	}
	if !slices.ContainsFunc(qs, func(q models.Question) bool { return q.ID == qid }) {
		return "", taskPath(r), models.Errorf(models.CodeNotFound, "question %d: not a question of task %s", qid, r.PathValue("id"))
	}
	if _, err := s.svc.AnswerQuestion(r.Context(), qid, r.PostFormValue("answer"), DefaultActor); err != nil {
		return "", taskPath(r), err
	}
	return "Answer sent.", taskPath(r), nil
}

// workChanged is the message of a decision posted from a page that
// showed another attempt's work than the task's current one.
const workChanged = "the work changed since this page was read; reload"

// currentAttempt is the attempt of the task's latest run, 0 before any.
func currentAttempt(d models.TaskDetail) int {
	n := 0
	for _, r := range d.Runs {
		n = max(n, r.Attempt)
	}
	return n
}

// checkAttempt refuses a decision whose form (field attempt) was read
// for another attempt than the task's current one: the person decides on
// the diff the page showed, not on a later attempt's.
func (s *Server) checkAttempt(r *http.Request) error {
	v := r.PostFormValue("attempt")
	seen, err := strconv.Atoi(v)
	if err != nil || seen < 0 {
		return models.Errorf(models.CodeInvalid, "attempt: not an attempt number (got %q)", v)
	}
	d, err := s.svc.GetTaskDetail(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if currentAttempt(d) != seen {
		return models.Errorf(models.CodeConflict, workChanged)
	}
	return nil
}

// approve approves the task's work (fields note and attempt).
func (s *Server) approve(r *http.Request) (string, string, error) {
	if err := s.checkAttempt(r); err != nil {
		return "", taskPath(r), err
	}
	res, err := s.svc.ApproveTask(r.Context(), r.PathValue("id"), DefaultActor, strings.TrimSpace(r.PostFormValue("note")))
	if err != nil {
		return "", taskPath(r), err
	}
	return "Approved: the task is " + string(res.To) + ".", taskPath(r), nil
}

// reject rejects the task's work with feedback for its next attempt
// (fields feedback and attempt).
func (s *Server) reject(r *http.Request) (string, string, error) {
	if err := s.checkAttempt(r); err != nil {
		return "", taskPath(r), err
	}
	res, err := s.svc.RejectTask(r.Context(), r.PathValue("id"), DefaultActor, strings.TrimSpace(r.PostFormValue("feedback")))
	if err != nil {
		return "", taskPath(r), err
	}
	return "Rejected: the task is " + string(res.To) + ".", taskPath(r), nil
}

// adminEvent applies an admin event (field reason) to the task.
func adminEvent(e models.TaskEvent, done string) func(*Server, *http.Request) (string, string, error) {
	return func(s *Server, r *http.Request) (string, string, error) {
		res, err := s.svc.ApplyEvent(r.Context(), models.TransitionRequest{TaskID: r.PathValue("id"), Event: e,
			Reason: strings.TrimSpace(r.PostFormValue("reason")), Actor: DefaultActor})
		if err != nil {
			return "", taskPath(r), err
		}
		return "The task was " + done + ": it is " + string(res.To) + ".", taskPath(r), nil
	}
}

// editPriority sets the task's priority (field priority).
func (s *Server) editPriority(r *http.Request) (string, string, error) {
	v := strings.TrimSpace(r.PostFormValue("priority"))
	n, err := strconv.Atoi(v)
	if err != nil {
		return "", taskPath(r), models.Errorf(models.CodeInvalid, "priority: must be a whole number (got %q)", v)
	}
	t, err := s.svc.EditTask(r.Context(), r.PathValue("id"), models.TaskPatch{Priority: &n})
	if err != nil {
		return "", taskPath(r), err
	}
	return fmt.Sprintf("Priority set to %d.", t.Priority), taskPath(r), nil
}

// editAgentType routes the task to agents of a type (field agent_type;
// empty: any agent).
func (s *Server) editAgentType(r *http.Request) (string, string, error) {
	v := strings.TrimSpace(r.PostFormValue("agent_type"))
	t, err := s.svc.EditTask(r.Context(), r.PathValue("id"), models.TaskPatch{AgentType: &v})
	if err != nil {
		return "", taskPath(r), err
	}
	if t.AgentType == "" {
		return "Any agent may take the task now.", taskPath(r), nil
	}
	return "Only agents of type " + t.AgentType + " may take the task now.", taskPath(r), nil
}

// editable reports whether a task in status s may be edited: it is not
// being worked on and has not completed (the store also refuses a task
// whose run has not ended yet).
func editable(s models.TaskStatus) bool { return !s.Running() && s != models.StatusCompleted }

// formTimeout shows a timeout as the form takes it back: empty for none,
// else without the zero units time.Duration writes ("30m", "1h", "1h30m").
func formTimeout(d models.Duration) string {
	if d == 0 {
		return ""
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// formMetadata shows metadata as key=value lines, sorted by key.
func formMetadata(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		b.WriteString(k + "=" + m[k] + "\n")
	}
	return b.String()
}

// formLines normalises a textarea's text for comparison: line breaks as
// \n, no trailing blanks at the ends of lines, no blank lines at the end.
func formLines(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n")
}

// parseMetadata reads key=value lines (blank lines skipped, key and value
// trimmed) into metadata, naming the line of a bad or repeated key.
func parseMetadata(s string) (map[string]string, error) {
	m := map[string]string{}
	seen := map[string]int{}
	for i, line := range strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		k, v, found := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if !found || k == "" {
			return nil, models.Errorf(models.CodeInvalid, "metadata: line %d: %s is not key=value", i+1, models.Quote(strings.TrimSpace(line)))
		}
		if j, dup := seen[k]; dup {
			return nil, models.Errorf(models.CodeInvalid, "metadata: line %d: key %s is already set on line %d", i+1, models.Quote(k), j)
		}
		seen[k] = i + 1
		m[k] = strings.TrimSpace(v)
	}
	return m, nil
}

// limitsPatch reads the "Limits and routing" form (fields kind, timeout:
// a duration such as 30m, empty for none; expected_count: empty or 0 for
// none; metadata: key=value lines, empty to clear) into a patch that sets
// only the fields whose values differ from the task's, so that a form
// posted to change one field does not rewrite the others.
func limitsPatch(r *http.Request, t models.Task) (models.TaskPatch, error) {
	var p models.TaskPatch
	if edited(r, "kind") {
		if kind := strings.TrimSpace(r.PostFormValue("kind")); kind != t.Kind {
			p.Kind = &kind
		}
	}
	if edited(r, "timeout") {
		var timeout time.Duration
		if v := strings.TrimSpace(r.PostFormValue("timeout")); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return p, models.Errorf(models.CodeInvalid, "timeout: %s is not a duration such as 30m or 2h (empty: none)", models.Quote(v))
			}
			timeout = d
		}
		if d := models.Duration(timeout); d != t.Timeout {
			p.Timeout = &d
		}
	}
	if edited(r, "expected_count") {
		var count int
		if v := strings.TrimSpace(r.PostFormValue("expected_count")); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return p, models.Errorf(models.CodeInvalid, "expected_count: must be a whole number (got %q)", v)
			}
			count = n
		}
		if count != t.ExpectedCount {
			p.ExpectedCount = &count
		}
	}
	// Metadata left as the page showed it is not read back: a value the
	// lines cannot hold exactly (a line break, blanks at its ends) stays.
	v := r.PostFormValue("metadata")
	if shown, ok := r.PostForm["shown_metadata"]; ok && formLines(v) == formLines(shown[0]) {
		return p, nil
	}
	if formLines(v) != formLines(formMetadata(t.Metadata)) {
		m, err := parseMetadata(v)
		if err != nil {
			return p, err
		}
		if !maps.Equal(m, t.Metadata) {
			p.Metadata = &m
		}
	}
	return p, nil
}

// edited reports whether the person changed field name of a form: its
// value differs from the one the page showed (the hidden shown_<name>), so
// that a form left alone does not put back a value someone else changed
// since the page was read. A form without what it showed counts every
// field as given.
func edited(r *http.Request, name string) bool {
	v := strings.TrimSpace(r.PostFormValue(name))
	shown, ok := r.PostForm["shown_"+name]
	return !ok || len(shown) == 0 || v != strings.TrimSpace(shown[0])
}

// editLimits sets the task's kind, timeout, expected count and metadata
// from the "Limits and routing" form (limitsPatch): only the fields the
// person changed are edited.
func (s *Server) editLimits(r *http.Request) (string, string, error) {
	d, err := s.svc.GetTaskDetail(r.Context(), r.PathValue("id"))
	if err != nil {
		return "", taskPath(r), err
	}
	p, err := limitsPatch(r, d.Task)
	if err != nil {
		return "", taskPath(r), err
	}
	if len(p.Fields()) == 0 {
		return "Nothing changed: the form holds the current values.", taskPath(r), nil
	}
	if _, err := s.svc.EditTask(r.Context(), d.Task.ID, p); err != nil {
		return "", taskPath(r), err
	}
	return "Changed: " + strings.Join(p.Fields(), ", ") + ".", taskPath(r), nil
}
