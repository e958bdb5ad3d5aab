package web

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func init() {
	register(Page{Pattern: "GET " + Prefix + "/overview", Template: "overview", Nav: NavOverview, Load: (*Server).loadOverview})
}

// overviewPage is the data of the overview.
type overviewPage struct {
	Now      time.Time
	Projects []projectRow
	Agents   []agentRow
	// Runners are the runners, by name, each with whether it is
	// connected and its runs in progress.
	Runners []models.Runner
	// Activity counts the tasks agents work on and those waiting to land
	// or be verified, of all projects.
	Activity models.Activity
	// Desk is what waits on a person, oldest first; DeskTruncated says
	// more waits.
	Desk          []deskRow
	DeskTruncated bool
	Budget        *models.BudgetReport
}

// projectRow is one project of the overview: its tasks by status, its
// share of the agent time in the window against its share of the weights.
type projectRow struct {
	Project models.Project
	// Open counts its tasks not COMPLETED; Ready, Working, ToLand and
	// Waiting count the READY ones, those an agent or a process of the
	// daemon works on, those whose work waits to be verified or to land,
	// and the others that wait (on a person, a time or another task).
	Open, Ready, Working, ToLand, Waiting, Completed, Blocked int
	// AgentSeconds is its agent time in the window; TimeShare its share of
	// all projects' (percent); WeightShare its weight's share of the
	// active projects' weights (percent).
	AgentSeconds float64
	TimeShare    int
	WeightShare  int
	// TokensInWindow and BudgetLimit are its token use and cap.
	Tokens *models.ProjectBudget
}

// deskRow is one item of the desk as the overview shows it.
type deskRow struct {
	Item models.DeskItem
	// Kind names the kind for a person ("Question", "Pull request").
	Kind string
	// Page is the dashboard page where the wait ends (a task's, at its
	// answer, approve or restart form; the budgets), or "".
	Page string
	// External is the action's address outside the dashboard (a pull
	// request), or "".
	External string
	// PageLabel says what Page offers ("Answer on the task page").
	PageLabel string
	// Notes add what the item's text does not say: the tasks behind it,
	// that the run that asked has ended.
	Notes []string
}

// deskKindNames name the desk's kinds on the overview.
var deskKindNames = map[models.DeskKind]string{
	models.DeskQuestion:    "Question",
	models.DeskHumanCheck:  "Verification",
	models.DeskApproval:    "Approval",
	models.DeskPullRequest: "Pull request",
	models.DeskLanding:     "Landing",
	models.DeskBlocked:     "Blocked",
	models.DeskBudget:      "Budget",
	models.DeskAgent:       "Agent",
}

// deskPageLabels say what a task's page offers for an item of a kind.
var deskPageLabels = map[models.DeskKind]string{
	models.DeskQuestion:    "Answer on the task page",
	models.DeskHumanCheck:  "Approve or reject on the task page",
	models.DeskApproval:    "Approve or reject on the task page",
	models.DeskPullRequest: "Approve or reject on the task page",
	models.DeskBlocked:     "Restart, skip or cancel on the task page",
}

// newDeskRow shows a desk item: where its wait ends on the dashboard (the
// task's page; the budget page for a budget: under base, the session's)
// and outside it.
func newDeskRow(it models.DeskItem, base string) deskRow {
	r := deskRow{Item: it, Kind: deskKindNames[it.Kind]}
	if r.Kind == "" {
		r.Kind = string(it.Kind)
	}
	switch {
	case it.TaskID != "":
		r.Page, r.PageLabel = base+"/tasks/"+it.TaskID, deskPageLabels[it.Kind]
		if r.PageLabel == "" {
			r.PageLabel = "Open the task"
		}
		switch it.Kind {
		case models.DeskQuestion:
			r.Page += fmt.Sprintf("#answer-%d", it.QuestionID)
		case models.DeskHumanCheck, models.DeskApproval, models.DeskPullRequest:
			r.Page += "#approve"
		case models.DeskBlocked:
			r.Page += "#restart"
		}
	case it.Kind == models.DeskBudget:
		r.Page, r.PageLabel = base+"/budget", "See the budgets"
	}
	if u := it.Action.URL; strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		r.External = u
	}
	if it.Behind > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d task(s) blocked behind it", it.Behind))
	}
	if it.RunEnded {
		r.Notes = append(r.Notes, "its run ended: the answer starts a new one")
	}
	return r
}

// agentRow is one agent and what it does now.
type agentRow struct {
	Agent models.Agent
	// Task is the task it works on, if any.
	Task *models.Task
	// Since is when the task's latest status began (its updated time).
	Since time.Time
	// Progress is the last line of the run's log.
	Progress string
}

// loadOverview reads the overview: the service's Overview (projects,
// agents, runners, counts, activity, working tasks, the desk, budget) and
// each project's agent time.
func (s *Server) loadOverview(r *http.Request) (any, error) {
	ctx := r.Context()
	ov, err := s.svc.Overview(ctx)
	if err != nil {
		return nil, fmt.Errorf("overview: %w", err)
	}
	usage, err := s.svc.AgentTime(ctx)
	if err != nil {
		return nil, fmt.Errorf("overview: %w", err)
	}
	// The store's overview leaves the budget to the caller, which knows
	// the window and the global budget.
	if ov.Budget == nil {
		b, err := s.svc.Budget(ctx)
		if err != nil {
			return nil, fmt.Errorf("overview: %w", err)
		}
		ov.Budget = &b
	}
	p := overviewPage{Now: s.cfg.Now(), Activity: ov.Activity, DeskTruncated: ov.DeskTruncated, Budget: ov.Budget,
		Runners: ov.Runners}
	for _, it := range ov.Desk {
		p.Desk = append(p.Desk, newDeskRow(it, baseOf(r)))
	}
	seconds := map[string]float64{}
	var totalSeconds, totalWeight float64
	for _, u := range usage {
		seconds[u.Project.ID] = u.AgentSeconds
		totalSeconds += u.AgentSeconds
	}
	for _, pr := range ov.Projects {
		if pr.Status == models.ProjectActive {
			totalWeight += pr.CreditWeight
		}
	}
	tokens := map[string]*models.ProjectBudget{}
	if ov.Budget != nil {
		for i := range ov.Budget.Projects {
			tokens[ov.Budget.Projects[i].ProjectID] = &ov.Budget.Projects[i]
		}
	}
	for _, pr := range ov.Projects {
		act := ov.ProjectActivity[pr.ID]
		row := projectRow{Project: pr, AgentSeconds: seconds[pr.ID], Tokens: tokens[pr.ID],
			Working: act.AgentsWorking, ToLand: act.WaitingToLand}
		for st, n := range ov.Counts[pr.ID] {
			switch st {
			case models.StatusCompleted:
				row.Completed += n
				continue
			case models.StatusReady:
				row.Ready += n
			case models.StatusBlocked:
				row.Blocked += n
			}
			row.Open += n
		}
		row.Waiting = max(row.Open-row.Ready-row.Blocked-row.Working-row.ToLand, 0)
		if totalSeconds > 0 {
			row.TimeShare = percent(row.AgentSeconds, totalSeconds)
		}
		if pr.Status == models.ProjectActive && totalWeight > 0 {
			row.WeightShare = percent(pr.CreditWeight, totalWeight)
		}
		p.Projects = append(p.Projects, row)
	}
	working := map[string]*models.Task{}
	for i := range ov.Working {
		working[ov.Working[i].ID] = &ov.Working[i]
	}
	for _, a := range ov.Agents {
		row := agentRow{Agent: a}
		if a.CurrentTaskID != nil {
			if t := working[*a.CurrentTaskID]; t != nil {
				row.Task = t
				row.Since = t.UpdatedAt
				row.Progress = s.lastLine(r, t.ID)
			}
		}
		p.Agents = append(p.Agents, row)
	}
	return p, nil
}

// lastLineBytes is how much of a log's end lastLine reads.
const lastLineBytes = 4 << 10

// lastLine returns the last non-empty line of the latest run's log of a
// task, or "" (an unreadable log is no reason to fail the page).
func (s *Server) lastLine(r *http.Request, taskID string) string {
	c, err := s.svc.ReadTaskLog(r.Context(), taskID, 0, -lastLineBytes, lastLineBytes)
	if err != nil {
		return ""
	}
	return lastNonEmptyLine(c.Data)
}

// lastNonEmptyLine returns the last line of s with text, trimmed and cut
// to maxProgressLen characters.
func lastNonEmptyLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			if r := []rune(l); len(r) > maxProgressLen {
				l = string(r[:maxProgressLen]) + "…"
			}
			return l
		}
	}
	return ""
}

// maxProgressLen caps the progress line shown for an agent.
const maxProgressLen = 200
