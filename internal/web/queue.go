package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

func init() {
	register(Page{Pattern: "GET " + Prefix + "/queue", Template: "queue", Nav: NavQueue, Load: (*Server).loadQueue})
}

// QueuePageSize is how many tasks a page of the queue shows.
const QueuePageSize = 50

// Status choices of the queue's filter besides the statuses themselves.
const (
	// statusOpen (the default) is every status but COMPLETED.
	statusOpen = "open"
	// statusAll is every status.
	statusAll = "all"
)

// queuePage is the data of the queue.
type queuePage struct {
	Projects []models.Project
	Statuses []models.TaskStatus
	// The filter as asked: project, status (a status, "open" or "all"),
	// creator and kind.
	Project, Status, Creator, Kind string
	Tasks                          []models.Task
	// Upstreams are, by task id, the upstreams a DEFINED task of the page
	// still waits for (their edges undecided).
	Upstreams map[string][]models.Task
	// Next is the URL of the next page, empty on the last.
	Next string
	// First is set when this is not the first page.
	First string
}

// loadQueue lists tasks by the query's filter (project, status, creator,
// kind), QueuePageSize at a time in the order they were submitted, after
// the task ?after= names.
func (s *Server) loadQueue(r *http.Request) (any, error) {
	ctx := r.Context()
	q := r.URL.Query()
	p := queuePage{Statuses: models.TaskStatuses, Project: q.Get("project"), Status: q.Get("status"),
		Creator: strings.TrimSpace(q.Get("creator")), Kind: strings.TrimSpace(q.Get("kind"))}
	if p.Status == "" {
		p.Status = statusOpen
	}
	f := models.TaskFilter{ProjectID: p.Project, Kind: p.Kind, CreatedBy: p.Creator, Limit: QueuePageSize, AfterID: q.Get("after")}
	switch p.Status {
	case statusAll:
	case statusOpen:
		for _, st := range models.TaskStatuses {
			if st != models.StatusCompleted {
				f.Statuses = append(f.Statuses, st)
			}
		}
	default:
		st := models.TaskStatus(p.Status)
		if !st.Valid() {
			return nil, models.Errorf(models.CodeInvalid, "status: unknown task status %q", p.Status)
		}
		f.Statuses = []models.TaskStatus{st}
	}
	projects, err := s.svc.ListProjects(ctx)
	if err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	p.Projects = projects
	if p.Tasks, err = s.svc.ListTasks(ctx, f); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	var defined []string
	for _, t := range p.Tasks {
		if t.Status == models.StatusDefined {
			defined = append(defined, t.ID)
		}
	}
	if p.Upstreams, err = s.svc.PendingUpstreams(ctx, defined); err != nil {
		return nil, fmt.Errorf("queue: %w", err)
	}
	v := url.Values{}
	for k, val := range map[string]string{"project": p.Project, "status": p.Status, "creator": p.Creator, "kind": p.Kind} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if f.AfterID != "" {
		p.First = link(r, Prefix+"/queue?"+v.Encode())
	}
	if len(p.Tasks) == QueuePageSize {
		v.Set("after", p.Tasks[len(p.Tasks)-1].ID)
		p.Next = link(r, Prefix+"/queue?"+v.Encode())
	}
	return p, nil
}
