package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the task endpoints: create, list, read, edit and delete
// tasks, change their dependencies, and apply admin events to them.

// EventRequest is the body of POST /api/v1/tasks/{id}/events.
type EventRequest struct {
	// Event is one of models.AdminEvents.
	Event models.TaskEvent `json:"event"`
	// Reason is recorded with the transition.
	Reason string `json:"reason,omitempty"`
	// Actor names who sent the event; default DefaultActor.
	Actor string `json:"actor,omitempty"`
}

// BatchResponse answers POST /api/v1/tasks.
type BatchResponse struct {
	Results []models.BatchResult `json:"results"`
}

// TaskList answers GET /api/v1/tasks.
type TaskList struct {
	Tasks []models.Task `json:"tasks"`
	// Next, when set, continues the list: ?after=<Next>.
	Next string `json:"next,omitempty"`
}

func (s *Server) handleCreateTasks(w http.ResponseWriter, r *http.Request) {
	data, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	b, err := DecodeBatch(data)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	results, err := s.svc.CreateTasks(r.Context(), b)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	created, skipped := 0, 0
	for _, res := range results {
		if res.Skipped {
			skipped++
		} else {
			created++
		}
	}
	attrs := []any{"project_id", b.ProjectID, "created", created, "skipped", skipped}
	if created == 1 && skipped == 0 {
		attrs = append(attrs, "task_id", results[0].TaskID, "status", results[0].Status)
	}
	s.log.InfoContext(r.Context(), "tasks created", attrs...)
	writeEncoded(w, http.StatusCreated, appendBatchResponse(make([]byte, 0, 64+64*len(results)), results))
}

// appendBatchResponse appends the JSON of BatchResponse{Results: results}
// to dst, as encoding/json's Encoder writes it (newline included), without
// reflection: a batch answers one result per task, tens of thousands.
func appendBatchResponse(dst []byte, results []models.BatchResult) []byte {
	dst = append(dst, `{"results":[`...)
	for i, res := range results {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if res.LocalID != "" {
			dst = append(dst, `"id":`...)
			dst = appendJSONString(dst, res.LocalID)
			dst = append(dst, ',')
		}
		dst = append(dst, `"task_id":`...)
		dst = appendJSONString(dst, res.TaskID)
		dst = append(dst, `,"status":`...)
		dst = appendJSONString(dst, string(res.Status))
		if res.Skipped {
			dst = append(dst, `,"skipped":true`...)
		}
		dst = append(dst, '}')
	}
	return append(dst, "]}\n"...)
}

// appendJSONString appends s as encoding/json encodes it: as it stands
// when it holds only printable ASCII that needs no escape (the ids and
// statuses of tasks), through encoding/json otherwise.
func appendJSONString(dst []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			enc, err := json.Marshal(s)
			if err != nil { // a string always encodes
				panic(fmt.Sprintf("encode string: %v", err))
			}
			return append(dst, enc...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// DecodeBatch decodes a task batch: either a models.TaskBatch object or a
// bare JSON array of models.BatchTask entries that name their own project.
// It is as strict as the API: unknown fields and trailing data are errors.
func DecodeBatch(data []byte) (models.TaskBatch, error) {
	if b, ok := fastBatch(data); ok {
		return b, nil
	}
	return decodeBatchGeneral(data)
}

// decodeBatchGeneral is DecodeBatch through encoding/json and the strict
// checks: the way of any body, and the only one of a body fastBatch does
// not read, whose errors it words.
func decodeBatchGeneral(data []byte) (models.TaskBatch, error) {
	var b models.TaskBatch
	// The tasks are made at once, as many as the body holds (up to the
	// most a batch may have: a body of "[1,1,…" is not worth the memory).
	size := func(n int) { b.Tasks = make([]models.BatchTask, 0, min(n, models.MaxBatchSize)) }
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '[' {
		if err := decodeSized(data, &b.Tasks, "", size); err != nil {
			return models.TaskBatch{}, err
		}
		return b, nil
	}
	if err := decodeSized(data, &b, "tasks", size); err != nil {
		return models.TaskBatch{}, err
	}
	return b, nil
}

// taskQuery lists the query parameters of GET /api/v1/tasks.
var taskQuery = []string{"project", "status", "limit", "after", "archived"}

func (s *Server) handleListTasks(w http.ResponseWriter, r *http.Request) {
	f, err := parseTaskFilter(r.URL.RawQuery)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if f.ProjectID != "" {
		if _, err := s.svc.GetProject(r.Context(), f.ProjectID); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	page, err := s.taskPage(r.Context(), f, s.listBytes())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, page)
}

// taskReadChunk is how many tasks a list reads from the store at a time:
// with descriptions of up to models.MaxDescriptionLen characters, a whole
// page of MaxPageSize read at once could hold hundreds of megabytes.
const taskReadChunk = 50

// rawTaskList is a TaskList whose tasks are already encoded.
type rawTaskList struct {
	Tasks []json.RawMessage `json:"tasks"`
	Next  string            `json:"next,omitempty"`
	// lastID is the id of the last task in Tasks.
	lastID string
}

// taskPage reads the page of tasks f selects (at most f.Limit of them),
// taskReadChunk at a time, and encodes them until the next one would take
// the answer past budget bytes: a page then ends early, with "next" where
// it stopped. The first task is always answered, whatever its size, so
// paging always advances.
func (s *Server) taskPage(ctx context.Context, f models.TaskFilter, budget int) (rawTaskList, error) {
	limit := f.Limit
	page := rawTaskList{Tasks: []json.RawMessage{}}
	size := len(`{"tasks":[],"next":""}`) + 1
	for {
		f.Limit = min(limit-len(page.Tasks), taskReadChunk) + 1
		ts, err := s.svc.ListTasks(ctx, f)
		if err != nil {
			return rawTaskList{}, err
		}
		for i, t := range ts {
			if len(page.Tasks) == limit {
				page.Next = page.lastID
				return page, nil
			}
			b, err := json.Marshal(redactTask(t))
			if err != nil {
				return rawTaskList{}, fmt.Errorf("encode task %s: %w", t.ID, err)
			}
			if len(page.Tasks) > 0 && size+len(b)+len(t.ID)+1 > budget {
				page.Next = page.lastID
				return page, nil
			}
			page.Tasks = append(page.Tasks, b)
			page.lastID = t.ID
			size += len(b) + 1
			ts[i] = models.Task{} // let the read task go before the next is encoded
		}
		if len(ts) < f.Limit {
			return page, nil // the last of the tasks
		}
		f.AfterID = page.lastID
	}
}

// parseTaskFilter reads project, status (comma-separated statuses or
// status groups, repeatable), limit (DefaultPageSize when absent) and after.
func parseTaskFilter(rawQuery string) (models.TaskFilter, error) {
	var f models.TaskFilter
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return f, invalid("query: %v", err)
	}
	for name, vals := range q {
		if !slices.Contains(taskQuery, name) {
			return f, invalid("query parameter %q: unknown (known: %s)", name, strings.Join(taskQuery, ", "))
		}
		if name != "status" && len(vals) > 1 {
			return f, invalid("query parameter %q: given more than once", name)
		}
	}
	f.ProjectID = q.Get("project")
	f.AfterID = q.Get("after")
	if v := q.Get("archived"); v != "" {
		if f.Archived, err = strconv.ParseBool(v); err != nil {
			return f, invalid("query parameter \"archived\": %q is not true or false", v)
		}
	}
	if f.Limit, err = parseLimit(q.Get("limit")); err != nil {
		return f, err
	}
	for _, v := range q["status"] {
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part == "" {
				continue
			}
			set, err := models.ResolveStatusSet(part)
			if err != nil {
				return f, err
			}
			f.Statuses = append(f.Statuses, set...)
		}
	}
	slices.Sort(f.Statuses)
	f.Statuses = slices.Compact(f.Statuses)
	return f, nil
}

func (s *Server) handleGetTask(w http.ResponseWriter, r *http.Request) {
	d, err := s.svc.GetTaskDetail(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	d.Dependencies, d.Dependents, d.Events = nonNil(d.Dependencies), nonNil(d.Dependents), nonNil(d.Events)
	d.Task = redactTask(d.Task)
	for i := range d.Events {
		d.Events[i].Reason = models.RedactURL(d.Events[i].Reason)
	}
	if d.Verification != nil {
		v := *d.Verification
		v.Actor, v.Text = models.RedactURL(v.Actor), models.RedactURL(v.Text)
		d.Verification = &v
	}
	s.writeJSON(w, r, http.StatusOK, d)
}

func (s *Server) handleEditTask(w http.ResponseWriter, r *http.Request) {
	var patch models.TaskPatch
	if err := s.decodeBody(w, r, &patch); err != nil {
		s.writeError(w, r, err)
		return
	}
	t, err := s.svc.EditTask(r.Context(), r.PathValue("id"), patch)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "task edited", "task_id", t.ID, "fields", patch.Fields())
	s.writeJSON(w, r, http.StatusOK, redactTask(t))
}

func (s *Server) handleDeleteTask(w http.ResponseWriter, r *http.Request) {
	if err := noQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	if err := s.svc.DeleteTask(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "task deleted", "task_id", id)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleChangeDependencies(w http.ResponseWriter, r *http.Request) {
	var req models.DependencyChange
	if err := s.decodeBody(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.ChangeDependencies(r.Context(), r.PathValue("id"), req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res.Dependencies = nonNil(res.Dependencies)
	res.Task = redactTask(res.Task)
	s.log.InfoContext(r.Context(), "task dependencies changed", "task_id", res.Task.ID, "added", res.Added,
		"removed", res.Removed, "status", res.Task.Status)
	s.writeJSON(w, r, http.StatusOK, res)
}

func (s *Server) handleTaskEvent(w http.ResponseWriter, r *http.Request) {
	var req EventRequest
	if err := s.decodeBody(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := checkAdminEvent(req.Event); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Actor == "" {
		req.Actor = DefaultActor
	}
	s.applyAdminEvent(w, r, models.TransitionRequest{TaskID: r.PathValue("id"), Event: req.Event, Reason: req.Reason, Actor: req.Actor})
}

// applyAdminEvent validates and applies an admin event, logs it and answers
// with the transition's result.
func (s *Server) applyAdminEvent(w http.ResponseWriter, r *http.Request, tr models.TransitionRequest) {
	if err := tr.Validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.svc.ApplyEvent(r.Context(), tr)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "task event applied", "task_id", tr.TaskID, "event", tr.Event, "actor", tr.Actor,
		"from", res.From, "to", res.To, "duplicate", res.Duplicate, "blocked", len(res.Blocked))
	res.Task = redactTask(res.Task)
	s.writeJSON(w, r, http.StatusOK, res)
}

// CancelRequest is the body of POST /api/v1/tasks/{id}/cancel.
type CancelRequest struct {
	// Reason says why; it follows "cancelled by <actor>: " in the task's
	// status reason.
	Reason string `json:"reason,omitempty"`
	// Actor names who cancels; default DefaultActor.
	Actor string `json:"actor,omitempty"`
}

// handleCancelTask cancels a task in any unfinished status (ADMIN_CANCEL):
// its run ends and it becomes BLOCKED. A repeat answers the same result
// with duplicate set; a COMPLETED or otherwise BLOCKED task is a conflict.
func (s *Server) handleCancelTask(w http.ResponseWriter, r *http.Request) {
	var req CancelRequest
	data, err := s.readBody(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(bytes.TrimSpace(data)) > 0 { // the body is optional
		if err := decodeJSON(data, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if req.Actor == "" {
		req.Actor = DefaultActor
	}
	s.applyAdminEvent(w, r, models.TransitionRequest{TaskID: r.PathValue("id"), Event: models.EventAdminCancel,
		Reason: req.Reason, Actor: req.Actor})
}

// checkAdminEvent accepts only the events a person may send.
func checkAdminEvent(e models.TaskEvent) error {
	allowed := make([]string, len(models.AdminEvents))
	for i, a := range models.AdminEvents {
		allowed[i] = string(a)
	}
	list := strings.Join(allowed, ", ")
	switch {
	case e == "":
		return invalid("event: required (one of %s)", list)
	case !e.Valid():
		return invalid("event %q: unknown event (allowed: %s)", e, list)
	case !e.IsAdmin():
		return invalid("event %q: not accepted through the API (allowed: %s)", e, list)
	}
	return nil
}

// redactTask removes the credentials of URLs from a task's reasons (its
// next event's quotes the status reason): an older daemon copied a
// repository URL's credentials into reasons.
func redactTask(t models.Task) models.Task {
	t.StatusReason = models.RedactURL(t.StatusReason)
	t.NextEventReason = models.RedactURL(t.NextEventReason)
	return t
}
