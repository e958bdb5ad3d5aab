package web

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

func init() {
	register(Page{Pattern: "GET " + Prefix + "/overview", Template: "overview", Nav: NavOverview, Load: (*Server).loadOverview})
}

// overviewPage is the data of the overview.
type overviewPage struct {
	Now       time.Time
	Projects  []projectRow
	Agents    []agentRow
	Questions []models.Question
	Approvals []models.WaitingTask
	Broken    []models.WaitingTask
	Budget    *models.BudgetReport
}

// projectRow is one project of the overview: its tasks by status, its
// share of the agent time in the window against its share of the weights.
type projectRow struct {
	Project models.Project
	// Open counts its tasks not COMPLETED; Ready, Running and Waiting
	// count the READY ones, those agents work on and those that wait on a
	// person or another task.
	Open, Ready, Running, Waiting, Completed, Blocked int
	// AgentSeconds is its agent time in the window; TimeShare its share of
	// all projects' (percent); WeightShare its weight's share of the
	// active projects' weights (percent).
	AgentSeconds float64
	TimeShare    int
	WeightShare  int
	// TokensInWindow and BudgetLimit are its token use and cap.
	Tokens *models.ProjectBudget
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
// agents, counts, working tasks, questions, approvals, broken chains,
// budget) and each project's agent time.
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
	p := overviewPage{Now: s.cfg.Now(), Questions: ov.Questions, Approvals: ov.Approvals, Broken: ov.Broken, Budget: ov.Budget}
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
		row := projectRow{Project: pr, AgentSeconds: seconds[pr.ID], Tokens: tokens[pr.ID]}
		for st, n := range ov.Counts[pr.ID] {
			switch {
			case st == models.StatusCompleted:
				row.Completed += n
				continue
			case st == models.StatusReady:
				row.Ready += n
			case st == models.StatusBlocked:
				row.Blocked += n
			case slices.Contains(runningStatuses, st):
				row.Running += n
			default:
				row.Waiting += n
			}
			row.Open += n
		}
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

// runningStatuses are the statuses of tasks an agent or a check works on.
var runningStatuses = []models.TaskStatus{models.StatusAssigned, models.StatusInProgress, models.StatusVerifying}

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
