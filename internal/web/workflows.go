package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/web/dag"
)

// runsListed is how many runs the workflows page lists.
const runsListed = 50

func init() {
	funcs["fanOutText"] = fanOut
	register(
		Page{Pattern: "GET " + Prefix + "/workflows", Template: "workflows", Nav: NavWorkflows, Load: (*Server).loadWorkflows},
		Page{Pattern: "GET " + Prefix + "/workflows/{name}", Template: "workflow", Nav: NavWorkflows, Load: (*Server).loadWorkflow},
		Page{Pattern: "GET " + Prefix + "/runs/{id}", Template: "run", Nav: NavWorkflows, Load: (*Server).loadRun},
	)
	registerAction(
		Action{Pattern: "POST " + Prefix + "/runs/{id}/cancel", Do: (*Server).cancelRun},
		Action{Pattern: "POST " + Prefix + "/runs/{id}/retry", Do: (*Server).retryRun},
	)
}

// workflowsPage is the data of the workflows page.
type workflowsPage struct {
	Workflows []models.Workflow
	Runs      []models.WorkflowRun
}

func (s *Server) loadWorkflows(r *http.Request) (any, error) {
	ctx := r.Context()
	ws, err := s.svc.ListWorkflows(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("workflows: %w", err)
	}
	runs, err := s.svc.ListWorkflowRuns(ctx, models.RunFilter{Limit: runsListed})
	if err != nil {
		return nil, fmt.Errorf("workflow runs: %w", err)
	}
	return workflowsPage{Workflows: ws, Runs: runs}, nil
}

// workflowPage is the data of a workflow's page: its definition and its
// step graph, and its latest runs.
type workflowPage struct {
	Workflow models.Workflow
	Graph    graphView
	Runs     []models.WorkflowRun
}

func (s *Server) loadWorkflow(r *http.Request) (any, error) {
	ctx := r.Context()
	w, err := s.svc.GetWorkflow(ctx, r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	runs, err := s.svc.ListWorkflowRuns(ctx, models.RunFilter{Workflow: w.Name, Limit: runsListed})
	if err != nil {
		return nil, fmt.Errorf("runs of workflow %s: %w", w.Name, err)
	}
	g, err := stepGraph(w, nil, "", baseOf(r))
	if err != nil {
		return nil, err
	}
	return workflowPage{Workflow: w, Graph: g, Runs: runs}, nil
}

// runPage is the data of a run's page.
type runPage struct {
	Run   models.WorkflowRun
	Graph graphView
	Tasks []models.RunTask
	// Steps are the run's steps in the definition's order with their
	// tasks counted by status.
	Steps []stepRow
	// Ended says the run can no longer be cancelled; Retryable that
	// retry applies (failed or cancelled).
	Ended, Retryable bool
}

// stepRow is one step of a run: its tasks by status.
type stepRow struct {
	Name   string
	FanOut string
	Tasks  int
	Counts []statusCount
	Status models.TaskStatus
}

// statusCount is a number of tasks in one status.
type statusCount struct {
	Status models.TaskStatus
	N      int
}

func (s *Server) loadRun(r *http.Request) (any, error) {
	ctx := r.Context()
	run, err := s.svc.GetWorkflowRun(ctx, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	tasks, err := s.svc.RunTasks(ctx, run.ID)
	if err != nil {
		return nil, fmt.Errorf("tasks of run %s: %w", run.ID, err)
	}
	var w models.Workflow
	if len(run.Definition) > 0 {
		if err := json.Unmarshal(run.Definition, &w); err != nil {
			return nil, fmt.Errorf("run %s: read its workflow's definition: %w", run.ID, err)
		}
	}
	p := runPage{Run: run, Tasks: tasks,
		Ended:     run.Status != models.RunPending && run.Status != models.RunRunning,
		Retryable: run.Status == models.RunFailed || run.Status == models.RunCancelled}
	byStep := map[string][]models.RunTask{}
	for _, t := range tasks {
		byStep[t.StepName] = append(byStep[t.StepName], t)
	}
	for _, st := range w.Steps {
		p.Steps = append(p.Steps, newStepRow(st, byStep[st.Name]))
	}
	if p.Graph, err = stepGraph(w, byStep, run.ID, baseOf(r)); err != nil {
		return nil, err
	}
	return p, nil
}

// stepStatusOrder decides a step's colour from its tasks: the first of
// these any of its tasks is in; COMPLETED only when all are.
var stepStatusOrder = []models.TaskStatus{
	models.StatusBlocked, models.StatusFailed, models.StatusWaitingInput, models.StatusAwaitingApproval,
	models.StatusVerifying, models.StatusInProgress, models.StatusAssigned, models.StatusPaused,
	models.StatusReady, models.StatusDefined, models.StatusCompleted,
}

func newStepRow(st models.WorkflowStep, tasks []models.RunTask) stepRow {
	row := stepRow{Name: st.Name, FanOut: fanOut(st), Tasks: len(tasks)}
	counts := map[models.TaskStatus]int{}
	for _, t := range tasks {
		counts[t.Status]++
	}
	for _, s := range stepStatusOrder {
		if counts[s] > 0 {
			row.Counts = append(row.Counts, statusCount{s, counts[s]})
			if row.Status == "" {
				row.Status = s
			}
		}
	}
	return row
}

// fanOut describes how a step makes its tasks ("×3", "× plan.outputs.n",
// "each of plan.outputs.files"); empty for one task.
func fanOut(st models.WorkflowStep) string {
	switch {
	case st.Foreach != "":
		return "each of " + st.Foreach
	case st.Parallel != nil && st.Parallel.From != "":
		return "× " + st.Parallel.From
	case st.Parallel != nil:
		return "×" + strconv.Itoa(st.Parallel.Count)
	}
	return ""
}

// stepGraph draws a workflow's steps as a graph. With the run's tasks by
// step (byStep not nil) each step is coloured by its tasks and says how
// many there are and how many completed; a step of one task links to it,
// others to their rows on the run's page (under base, the session's).
func stepGraph(w models.Workflow, byStep map[string][]models.RunTask, runID, base string) (graphView, error) {
	var g dag.Graph
	for _, st := range w.Steps {
		n := dag.Node{ID: st.Name, Label: st.Name, Note: fanOut(st)}
		if byStep != nil {
			row := newStepRow(st, byStep[st.Name])
			n.Status = row.Status
			done := 0
			for _, c := range row.Counts {
				if c.Status == models.StatusCompleted {
					done = c.N
				}
			}
			switch tasks := byStep[st.Name]; {
			case len(tasks) == 0:
				n.Note = joinNonEmpty(n.Note, "not started")
			case len(tasks) == 1:
				n.Href = base + "/tasks/" + tasks[0].ID
			default:
				n.Note = joinNonEmpty(n.Note, fmt.Sprintf("%d/%d done", done, len(tasks)))
				n.Href = base + "/runs/" + runID + "#step-" + st.Name
			}
		}
		g.Nodes = append(g.Nodes, n)
		for _, d := range st.DependsOn {
			g.Edges = append(g.Edges, dag.Edge{Upstream: d.Step, Downstream: st.Name, Soft: !d.Required()})
		}
	}
	v := graphView{Tasks: len(g.Nodes), Edges: len(g.Edges), Base: base}
	if len(g.Nodes) == 0 {
		return v, nil
	}
	svg, err := drawGraph(g, "steps of workflow "+w.Name)
	v.SVG = svg
	return v, err
}

func joinNonEmpty(parts ...string) string {
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), " · ")
}

func (s *Server) cancelRun(r *http.Request) (string, string, error) {
	run, err := s.svc.CancelRun(r.Context(), r.PathValue("id"), DefaultActor)
	if err != nil {
		return "", "", err
	}
	return "Run " + run.ID + " is " + string(run.Status) + ".", Prefix + "/runs/" + run.ID, nil
}

func (s *Server) retryRun(r *http.Request) (string, string, error) {
	run, err := s.svc.RetryRun(r.Context(), r.PathValue("id"), DefaultActor)
	if err != nil {
		return "", "", err
	}
	return "Run " + run.ID + " is retried: " + string(run.Status) + ".", Prefix + "/runs/" + run.ID, nil
}
