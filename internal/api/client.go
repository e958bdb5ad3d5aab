package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service/areas"
)

// The areas the client serves over HTTP (see Client).
var (
	_ areas.Projects             = (*Client)(nil)
	_ areas.Landing              = (*Client)(nil)
	_ areas.Agents               = (*Client)(nil)
	_ areas.Runners              = (*Client)(nil)
	_ areas.Approvals            = (*Client)(nil)
	_ areas.Rules                = (*Client)(nil)
	_ areas.TaskCreator          = (*Client)(nil)
	_ areas.Workflows            = (*Client)(nil)
	_ areas.WorkflowRuns         = (*Client)(nil)
	_ areas.RunStarter           = (*Client)(nil)
	_ areas.RunStarterWithInputs = (*Client)(nil)
	_ areas.RunTaskLogs          = (*Client)(nil)
)

// DefaultClientTimeout bounds each request of a Client built without an
// http.Client.
const DefaultClientTimeout = 30 * time.Second

// maxErrorBody caps how much of an error answer the client reads.
const maxErrorBody = 64 << 10

// Client calls the API. Errors the server answered are *models.Error values
// carrying the server's code and message.
//
// It serves over HTTP the areas of the service (package areas) whose every
// operation the API exposes: Projects, Landing, Agents, Runners,
// Approvals, Rules, TaskCreator, Workflows, WorkflowRuns, RunStarter,
// RunStarterWithInputs and RunTaskLogs (asserted below). The other areas have operations the
// API does not expose, and the client does not claim them: Tasks
// (RunErrors, and ApplyEvent only for admin events), Questions
// (TaskQuestions, GetQuestion), Status (TaskCounts, Verifications), Usage,
// Hooks (runs of every hook, ListHookRunsAfter), WorkflowDocuments (the
// server names a document's problems itself), TokenHistory, TaskGraphs,
// HookActions (the agent RPC's), and Changes and Logs (streams).
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// NewClient returns a client for the server at baseURL (e.g.
// "http://127.0.0.1:7700"), sending token as a bearer token when not empty.
// hc may be nil.
func NewClient(baseURL, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("api client: %q is not an http(s) URL with a host", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if hc == nil {
		hc = &http.Client{Timeout: DefaultClientTimeout}
	}
	return &Client{base: u, token: token, hc: hc}, nil
}

// BaseURL returns the server's base URL.
func (c *Client) BaseURL() string { return c.base.String() }

// CloseIdleConnections closes the idle connections of the client's transport.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// Health checks the server and its store.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	return h, c.do(ctx, http.MethodGet, "/healthz", nil, nil, &h)
}

// CreateProject creates a project from the fields a new project may set
// (models.ProjectSpec); the daemon fills the rest.
func (c *Client) CreateProject(ctx context.Context, p models.Project) (models.Project, error) {
	spec := models.ProjectSpec{ID: p.ID, Name: p.Name, CreditWeight: p.CreditWeight, MaxConcurrentAgents: p.MaxConcurrentAgents,
		Status: p.Status, BudgetLimit: p.BudgetLimit, DiscordChannelID: p.DiscordChannelID, Repo: p.Repo, Settings: p.Settings}
	var out models.Project
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/projects", nil, spec, &out)
}

// ListProjects lists every project.
func (c *Client) ListProjects(ctx context.Context) ([]models.Project, error) {
	var out ProjectList
	return out.Projects, c.do(ctx, http.MethodGet, APIPrefix+"/projects", nil, nil, &out)
}

// GetProject returns one project.
func (c *Client) GetProject(ctx context.Context, id string) (models.Project, error) {
	var out models.Project
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/projects/"+url.PathEscape(id), nil, nil, &out)
}

// UpdateProject applies patch to a project and returns the result.
func (c *Client) UpdateProject(ctx context.Context, id string, patch models.ProjectPatch) (models.Project, error) {
	var out models.Project
	return out, c.do(ctx, http.MethodPatch, APIPrefix+"/projects/"+url.PathEscape(id), nil, patch, &out)
}

// CreateTasks creates a batch of tasks all-or-nothing.
func (c *Client) CreateTasks(ctx context.Context, b models.TaskBatch) ([]models.BatchResult, error) {
	var out BatchResponse
	return out.Results, c.do(ctx, http.MethodPost, APIPrefix+"/tasks", nil, b, &out)
}

// ListTasks lists tasks matching f in submission order: at most f.Limit of
// them (0: every one), after the task f.AfterID when it is set. It asks
// page by page (ListTasksPage) until it has them.
func (c *Client) ListTasks(ctx context.Context, f models.TaskFilter) ([]models.Task, error) {
	return collect(f.Limit, f.AfterID, func(limit int, after string) ([]models.Task, string, error) {
		p := f
		p.Limit, p.AfterID = limit, after
		tl, err := c.ListTasksPage(ctx, p)
		return tl.Tasks, tl.Next, err
	})
}

// ListTasksPage asks for one page of tasks matching f: at most f.Limit
// (0: DefaultPageSize; at most MaxPageSize), after the task f.AfterID or
// the cursor of a previous page. Its Next continues the list.
func (c *Client) ListTasksPage(ctx context.Context, f models.TaskFilter) (TaskList, error) {
	q := url.Values{}
	if f.ProjectID != "" {
		q.Set("project", f.ProjectID)
	}
	if len(f.Statuses) > 0 {
		s := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			s[i] = string(st)
		}
		q.Set("status", strings.Join(s, ","))
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.AfterID != "" {
		q.Set("after", f.AfterID)
	}
	if f.Archived {
		q.Set("archived", "true")
	}
	var out TaskList
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/tasks", q, nil, &out)
}

// collect gathers the items of a paged list: at most limit (0: every
// one), starting after the cursor after, asking fetch for one page at a
// time of at most MaxPageSize items.
func collect[T any](limit int, after string, fetch func(limit int, after string) ([]T, string, error)) ([]T, error) {
	all := []T{}
	for {
		size := MaxPageSize
		if limit > 0 {
			size = min(limit-len(all), MaxPageSize)
		}
		items, next, err := fetch(size, after)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		switch {
		case next == "" || (limit > 0 && len(all) >= limit):
			return all, nil
		case len(items) == 0 || next == after:
			return nil, fmt.Errorf("list: the server's cursor %s does not advance", quoteShort(next))
		}
		after = next
	}
}

// GetTask returns a task with its edges and events.
func (c *Client) GetTask(ctx context.Context, id string) (models.TaskDetail, error) {
	var out models.TaskDetail
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/tasks/"+url.PathEscape(id), nil, nil, &out)
}

// EditTask edits a task and returns it.
func (c *Client) EditTask(ctx context.Context, id string, patch models.TaskPatch) (models.Task, error) {
	var out models.Task
	return out, c.do(ctx, http.MethodPatch, APIPrefix+"/tasks/"+url.PathEscape(id), nil, patch, &out)
}

// ChangeDependencies adds and removes a task's dependencies.
func (c *Client) ChangeDependencies(ctx context.Context, id string, ch models.DependencyChange) (models.DependencyResult, error) {
	var out models.DependencyResult
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/tasks/"+url.PathEscape(id)+"/dependencies", nil, ch, &out)
}

// DeleteTask deletes a task.
func (c *Client) DeleteTask(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, APIPrefix+"/tasks/"+url.PathEscape(id), nil, nil, nil)
}

// DeleteProject deletes a project with its tasks, hooks and workflows.
func (c *Client) DeleteProject(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, APIPrefix+"/projects/"+url.PathEscape(id), nil, nil, nil)
}

// SendEvent sends an administrative event to a task.
func (c *Client) SendEvent(ctx context.Context, taskID string, req EventRequest) (models.TransitionResult, error) {
	var out models.TransitionResult
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/tasks/"+url.PathEscape(taskID)+"/events", nil, req, &out)
}

// CancelTask cancels a task in any unfinished status: its run ends and it
// becomes BLOCKED with the reason "cancelled by <actor>[: reason]".
func (c *Client) CancelTask(ctx context.Context, taskID string, req CancelRequest) (models.TransitionResult, error) {
	var out models.TransitionResult
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/tasks/"+url.PathEscape(taskID)+"/cancel", nil, req, &out)
}

// RegisterAgent registers an agent from the fields a registration sets
// (models.AgentRegistration); the daemon fills the rest.
func (c *Client) RegisterAgent(ctx context.Context, a models.Agent) (models.Agent, error) {
	reg := models.AgentRegistration{ID: a.ID, Name: a.Name, AgentType: a.AgentType, AgentSettings: a.AgentSettings}
	var out models.Agent
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/agents", nil, reg, &out)
}

// ListAgents lists every agent.
func (c *Client) ListAgents(ctx context.Context) ([]models.Agent, error) {
	var out AgentList
	return out.Agents, c.do(ctx, http.MethodGet, APIPrefix+"/agents", nil, nil, &out)
}

// GetAgent returns one agent, redacted.
func (c *Client) GetAgent(ctx context.Context, id string) (models.Agent, error) {
	var out models.Agent
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/agents/"+url.PathEscape(id), nil, nil, &out)
}

// RemoveAgent removes an agent.
func (c *Client) RemoveAgent(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, APIPrefix+"/agents/"+url.PathEscape(id), nil, nil, nil)
}

// Budget reports token use against the projects' and the global budgets.
func (c *Client) Budget(ctx context.Context) (models.BudgetReport, error) {
	var out models.BudgetReport
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/budget", nil, nil, &out)
}

// Status returns the daemon's overview with the budget report.
func (c *Client) Status(ctx context.Context) (models.Overview, error) {
	var out models.Overview
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/status", nil, nil, &out)
}

// Desk returns what waits on a person: of every project and the agents,
// or of project projectID only when it is not empty.
func (c *Client) Desk(ctx context.Context, projectID string) (models.Desk, error) {
	q := url.Values{}
	if projectID != "" {
		q.Set("project", projectID)
	}
	var out models.Desk
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/desk", q, nil, &out)
}

// Stats asks for each project's throughput over the last day.
func (c *Client) Stats(ctx context.Context) (models.Stats, error) {
	var out models.Stats
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/stats", nil, nil, &out)
}

// do sends one request with body encoded as JSON (when not nil) and decodes
// a 2xx answer into out (when not nil; an answer without a body, 204, has
// nothing to decode). A request that may change something says
// Content-Type application/json even without a body, as the server requires.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	var data []byte
	contentType := ""
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return fmt.Errorf("%s %s: encode request: %w", method, path, err)
		}
		contentType = "application/json"
	} else if !safeMethod(method) {
		contentType = "application/json"
	}
	_, err := c.send(ctx, method, path, query, contentType, data, out)
	return err
}

// send sends one request with a raw body of contentType (none when
// contentType is empty) and decodes a 2xx answer into out, as do does. It
// returns the answer's status.
func (c *Client) send(ctx context.Context, method, path string, query url.Values, contentType string, body []byte, out any) (int, error) {
	return c.sendWith(ctx, method, path, query, nil, contentType, body, out)
}

// sendWith is send with extra request headers.
func (c *Client) sendWith(ctx context.Context, method, path string, query url.Values, header http.Header, contentType string,
	body []byte, out any) (int, error) {
	// path is escaped (its segments went through url.PathEscape): it is
	// the raw path, so that an escaped '/', '[' or '%' stays as it is.
	u := *c.base
	raw := u.EscapedPath() + path
	unescaped, err := url.PathUnescape(raw)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, path, err)
	}
	u.Path, u.RawPath = unescaped, raw
	u.RawQuery = query.Encode()
	op := method + " " + path

	var rd io.Reader
	if contentType != "" {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, fmt.Errorf("%s %s: %w", method, u.String(), describeCertificateError(err))
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, responseError(resp)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody)) // lets the connection be reused
		return resp.StatusCode, nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return resp.StatusCode, fmt.Errorf("%s: decode answer: %w", op, err)
	}
	return resp.StatusCode, nil
}

// responseError turns an error answer into a *models.Error.
func responseError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var eb ErrorBody
	if err := json.Unmarshal(data, &eb); err == nil && eb.Error.Code != "" {
		return &models.Error{Code: eb.Error.Code, Message: eb.Error.Message}
	}
	if u := resp.Request.URL; resp.StatusCode == http.StatusBadRequest && u.Scheme == "http" &&
		strings.Contains(string(data), "HTTP request to an HTTPS server") {
		// Go's answer to plain HTTP on a TLS port.
		return &models.Error{Code: models.CodeInvalid, Message: fmt.Sprintf(
			"the daemon at %s serves https, not plain http: give its address as https://%s", u.Host, u.Host)}
	}
	code := models.CodeInternal
	switch resp.StatusCode {
	case http.StatusBadRequest:
		code = models.CodeInvalid
	case http.StatusNotFound:
		code = models.CodeNotFound
	case http.StatusConflict:
		code = models.CodeConflict
	case http.StatusUnauthorized:
		code = models.CodeUnauthorized
	}
	return &models.Error{Code: code, Message: fmt.Sprintf("server answered %s", resp.Status),
		Err: errors.New(strings.TrimSpace(string(data)))}
}

// OpenQuestions lists every question of the agents waiting for an
// answer, oldest first, asking page by page.
func (c *Client) OpenQuestions(ctx context.Context) ([]models.Question, error) {
	return collect(0, "", func(limit int, after string) ([]models.Question, string, error) {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if after != "" {
			q.Set("after", after)
		}
		var out QuestionList
		err := c.do(ctx, http.MethodGet, APIPrefix+"/questions", q, nil, &out)
		return out.Questions, out.Next, err
	})
}

// AnswerQuestion answers an agent's question.
func (c *Client) AnswerQuestion(ctx context.Context, id int64, answer, by string) (models.Question, error) {
	var out models.Question
	return out, c.do(ctx, http.MethodPost, fmt.Sprintf("%s/questions/%d/answer", APIPrefix, id), nil,
		AnswerRequest{Answer: answer, AnsweredBy: by}, &out)
}

// ApproveTask approves a task waiting for a person (HUMAN verification, work
// or a plan awaiting approval, a pull request).
func (c *Client) ApproveTask(ctx context.Context, id, by, note string) (models.TransitionResult, error) {
	var out models.TransitionResult
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/tasks/"+url.PathEscape(id)+"/approve", nil,
		DecisionRequest{Feedback: note, By: by}, &out)
}

// LandProject retries the waiting landings of a project.
//
// The call has no overall timeout (the daemon answers once every waiting
// landing has been tried, each bounded by its git operations): ctx bounds
// it.
func (c *Client) LandProject(ctx context.Context, id string) (models.LandResult, error) {
	var out models.LandResult
	return out, c.untimed().do(ctx, http.MethodPost, APIPrefix+"/projects/"+url.PathEscape(id)+"/land", nil, struct{}{}, &out)
}

// RejectTask rejects a task waiting for a person, with feedback for its next attempt.
func (c *Client) RejectTask(ctx context.Context, id, by, feedback string) (models.TransitionResult, error) {
	var out models.TransitionResult
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/tasks/"+url.PathEscape(id)+"/reject", nil,
		DecisionRequest{Feedback: feedback, By: by}, &out)
}

// TaskDiff returns the change a task's branch makes against its project's
// default branch.
func (c *Client) TaskDiff(ctx context.Context, id string) (string, error) {
	var out TaskDiff
	err := c.do(ctx, http.MethodGet, APIPrefix+"/tasks/"+url.PathEscape(id)+"/diff", nil, nil, &out)
	return out.Diff, err
}

// SetAgentPaused pauses or resumes an agent.
func (c *Client) SetAgentPaused(ctx context.Context, id string, paused bool) (models.Agent, error) {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	var out models.Agent
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/agents/"+url.PathEscape(id)+"/"+verb, nil, nil, &out)
}

// ListHooks lists the hooks of a project, or of every project when
// projectID is empty.
func (c *Client) ListHooks(ctx context.Context, projectID string) ([]models.Hook, error) {
	q := url.Values{}
	if projectID != "" {
		q.Set("project", projectID)
	}
	var out HookList
	return out.Hooks, c.do(ctx, http.MethodGet, APIPrefix+"/hooks", q, nil, &out)
}

// GetHook returns one hook.
func (c *Client) GetHook(ctx context.Context, id string) (models.Hook, error) {
	var out models.Hook
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/hooks/"+url.PathEscape(id), nil, nil, &out)
}

// CreateHook creates a hook.
func (c *Client) CreateHook(ctx context.Context, spec models.HookSpec) (models.Hook, error) {
	var out models.Hook
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/hooks", nil, spec, &out)
}

// UpdateHook applies patch to a hook and returns the result.
func (c *Client) UpdateHook(ctx context.Context, id string, patch models.HookPatch) (models.Hook, error) {
	var out models.Hook
	return out, c.do(ctx, http.MethodPatch, APIPrefix+"/hooks/"+url.PathEscape(id), nil, patch, &out)
}

// DeleteHook deletes a hook with its runs.
func (c *Client) DeleteHook(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, APIPrefix+"/hooks/"+url.PathEscape(id), nil, nil, nil)
}

// FireHook fires a hook by hand and returns its run: running, or skipped
// with the reason.
func (c *Client) FireHook(ctx context.Context, id string, req FireRequest) (models.HookRun, error) {
	var out models.HookRun
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/hooks/"+url.PathEscape(id)+"/fire", nil, req, &out)
}

// HookRuns lists a hook's runs, newest first: all of them, or those in
// status, at most limit (0: every one), asking page by page.
func (c *Client) HookRuns(ctx context.Context, hookID, status string, limit int) ([]models.HookRun, error) {
	return collect(limit, "", func(limit int, after string) ([]models.HookRun, string, error) {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if status != "" {
			q.Set("status", status)
		}
		if after != "" {
			q.Set("after", after)
		}
		var out HookRunList
		err := c.do(ctx, http.MethodGet, APIPrefix+"/hooks/"+url.PathEscape(hookID)+"/runs", q, nil, &out)
		return out.Runs, out.Next, err
	})
}

// GetHookRun returns one hook run.
func (c *Client) GetHookRun(ctx context.Context, id string) (models.HookRun, error) {
	var out models.HookRun
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/hook-runs/"+url.PathEscape(id), nil, nil, &out)
}

// ListWorkflows lists the workflows of a project, or of every project when
// projectID is empty.
func (c *Client) ListWorkflows(ctx context.Context, projectID string) ([]models.Workflow, error) {
	q := url.Values{}
	if projectID != "" {
		q.Set("project", projectID)
	}
	var out WorkflowList
	return out.Workflows, c.do(ctx, http.MethodGet, APIPrefix+"/workflows", q, nil, &out)
}

// GetWorkflow returns one workflow.
func (c *Client) GetWorkflow(ctx context.Context, name string) (models.Workflow, error) {
	var out models.Workflow
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/workflows/"+url.PathEscape(name), nil, nil, &out)
}

// SaveWorkflow sends a workflow document (YAML or JSON) as is: it creates
// the workflow it names (created true) or replaces the one of that name.
// An invalid document is a CodeInvalid error with one line per problem,
// "request:LINE:COL: PATH: MESSAGE".
func (c *Client) SaveWorkflow(ctx context.Context, doc []byte) (w models.Workflow, created bool, err error) {
	contentType := "application/yaml"
	if trimmed := bytes.TrimSpace(doc); len(trimmed) > 0 && trimmed[0] == '{' {
		contentType = "application/json"
	}
	status, err := c.send(ctx, http.MethodPost, APIPrefix+"/workflows", nil, contentType, doc, &w)
	return w, status == http.StatusCreated, err
}

// DeleteWorkflow deletes a workflow; its runs stay.
func (c *Client) DeleteWorkflow(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, APIPrefix+"/workflows/"+url.PathEscape(name), nil, nil, nil)
}

// SetWorkflowSchedule turns a workflow's schedule on or off.
func (c *Client) SetWorkflowSchedule(ctx context.Context, name string, enabled bool) (models.Workflow, error) {
	var out models.Workflow
	return out, c.do(ctx, http.MethodPatch, APIPrefix+"/workflows/"+url.PathEscape(name), nil,
		WorkflowPatch{ScheduleEnabled: &enabled}, &out)
}

// StartRun starts a run of a workflow by hand; actor names who (empty: the
// server's default).
func (c *Client) StartRun(ctx context.Context, name, actor string) (models.WorkflowRun, error) {
	return c.StartRunWith(ctx, name, actor, nil)
}

// StartRunWith starts a run of a workflow by hand with values for its
// inputs.
func (c *Client) StartRunWith(ctx context.Context, name, actor string, inputs map[string]string) (models.WorkflowRun, error) {
	var out models.WorkflowRun
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/workflows/"+url.PathEscape(name)+"/runs", nil,
		RunRequest{Actor: actor, Inputs: inputs}, &out)
}

// ListWorkflowRuns lists workflow runs matching f, newest first, at most
// f.Limit (0: every one), asking page by page.
func (c *Client) ListWorkflowRuns(ctx context.Context, f models.RunFilter) ([]models.WorkflowRun, error) {
	return c.ListWorkflowRunsAfter(ctx, f, "")
}

// ListWorkflowRunsAfter lists workflow runs matching f after the run
// afterID (empty: from the newest), newest first, at most f.Limit (0:
// every one), asking page by page.
func (c *Client) ListWorkflowRunsAfter(ctx context.Context, f models.RunFilter, afterID string) ([]models.WorkflowRun, error) {
	return collect(f.Limit, afterID, func(limit int, after string) ([]models.WorkflowRun, string, error) {
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		for k, v := range map[string]string{"workflow": f.Workflow, "project": f.ProjectID, "status": string(f.Status), "after": after} {
			if v != "" {
				q.Set(k, v)
			}
		}
		var out WorkflowRunList
		err := c.do(ctx, http.MethodGet, APIPrefix+"/runs", q, nil, &out)
		return out.Runs, out.Next, err
	})
}

// GetWorkflowRun returns one workflow run with its tasks counted by status.
func (c *Client) GetWorkflowRun(ctx context.Context, id string) (models.WorkflowRun, error) {
	var out models.WorkflowRun
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/runs/"+url.PathEscape(id), nil, nil, &out)
}

// CancelRun cancels a run, stopping its tasks.
func (c *Client) CancelRun(ctx context.Context, id, actor string) (models.WorkflowRun, error) {
	var out models.WorkflowRun
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/runs/"+url.PathEscape(id)+"/cancel", nil, ActorRequest{Actor: actor}, &out)
}

// RetryRun starts a failed or cancelled run's failed and blocked tasks again.
func (c *Client) RetryRun(ctx context.Context, id, actor string) (models.WorkflowRun, error) {
	var out models.WorkflowRun
	return out, c.do(ctx, http.MethodPost, APIPrefix+"/runs/"+url.PathEscape(id)+"/retry", nil, ActorRequest{Actor: actor}, &out)
}

// RunTasks lists a run's tasks, each with its name in the run.
func (c *Client) RunTasks(ctx context.Context, runID string) ([]models.RunTask, error) {
	var out RunTaskList
	return out.Tasks, c.do(ctx, http.MethodGet, APIPrefix+"/runs/"+url.PathEscape(runID)+"/tasks", nil, nil, &out)
}

// RunTaskLogs returns the logs of a run's task by its name in the run
// ("build", "upgrade[2]"): of every attempt when attempt is 0, else of
// that one.
func (c *Client) RunTaskLogs(ctx context.Context, runID, name string, attempt int) (models.TaskLogs, error) {
	q := url.Values{}
	if attempt != 0 {
		q.Set("attempt", strconv.Itoa(attempt))
	}
	var out models.TaskLogs
	return out, c.do(ctx, http.MethodGet, APIPrefix+"/runs/"+url.PathEscape(runID)+"/tasks/"+url.PathEscape(name)+"/logs",
		q, nil, &out)
}

// RunnerHello says a runner's hello (the client's token is the runner's):
// POST RunnerPrefix/hello.
func (c *Client) RunnerHello(ctx context.Context, h models.RunnerHello) (models.RunnerWelcome, error) {
	var out models.RunnerWelcome
	return out, c.do(ctx, http.MethodPost, RunnerPrefix+"/hello", nil, h, &out)
}

// RunnerHeartbeat renews the leases of a runner's runs: POST
// RunnerPrefix/heartbeat.
func (c *Client) RunnerHeartbeat(ctx context.Context, hb models.RunnerHeartbeat) (models.RunnerHeartbeatAnswer, error) {
	var out models.RunnerHeartbeatAnswer
	return out, c.do(ctx, http.MethodPost, RunnerPrefix+"/heartbeat", nil, hb, &out)
}

// RunnerReport sends one numbered report about a run, with the run's
// token: POST RunnerPrefix/runs/{id}/reports.
func (c *Client) RunnerReport(ctx context.Context, runID int64, token string, rep models.RunnerReport) (models.RunnerReportAnswer, error) {
	var out models.RunnerReportAnswer
	data, err := json.Marshal(rep)
	if err != nil {
		return out, fmt.Errorf("report on run %d: %w", runID, err)
	}
	_, err = c.sendWith(ctx, http.MethodPost, RunnerPrefix+"/runs/"+strconv.FormatInt(runID, 10)+"/reports", nil,
		http.Header{HeaderRunToken: {token}}, "application/json", data, &out)
	return out, err
}

// RunnerLog sends a chunk of a run's output that starts at byte offset of
// the runner's log and returns how much of the log the daemon has: POST
// RunnerPrefix/runs/{id}/log?offset=N.
func (c *Client) RunnerLog(ctx context.Context, runID int64, token string, offset int64, data []byte) (int64, error) {
	var out RunnerLogAnswer
	_, err := c.sendWith(ctx, http.MethodPost, RunnerPrefix+"/runs/"+strconv.FormatInt(runID, 10)+"/log",
		url.Values{"offset": {strconv.FormatInt(offset, 10)}}, http.Header{HeaderRunToken: {token}},
		"application/octet-stream", data, &out)
	return out.Have, err
}

// RunnerPoll makes a runner's poll and waits for its answer, held by the
// daemon up to its poll hold: GET RunnerPrefix/poll.
func (c *Client) RunnerPoll(ctx context.Context) (models.RunnerPoll, error) {
	var out models.RunnerPoll
	return out, c.do(ctx, http.MethodGet, RunnerPrefix+"/poll", nil, nil, &out)
}
