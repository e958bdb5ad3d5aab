package models

// Bounds of a task graph.
const (
	// MaxGraphTasks caps the tasks of one graph; a graph cut there says
	// so (Truncated).
	MaxGraphTasks = 2000
	// DefaultGraphDepth is how many edges away from a task its
	// neighbourhood reaches, upward and downward; MaxGraphDepth bounds it.
	DefaultGraphDepth = 2
	MaxGraphDepth     = 10
)

// TaskGraphQuery asks for a graph of tasks: a project's open work (every
// task not COMPLETED) when ProjectID is set, else the neighbourhood of the
// task Around (its upstreams and dependents up to Depth edges away).
type TaskGraphQuery struct {
	ProjectID string
	Around    string
	Depth     int
}

// Validate checks that the query names one project or one task and a
// depth in range.
func (q TaskGraphQuery) Validate() error {
	switch {
	case (q.ProjectID == "") == (q.Around == ""):
		return Errorf(CodeInvalid, "task graph: name a project or a task, one of them")
	case q.Depth < 0 || q.Depth > MaxGraphDepth:
		return Errorf(CodeInvalid, "task graph: depth %d is not between 0 and %d", q.Depth, MaxGraphDepth)
	}
	return nil
}

// GraphEdge is a dependency between two tasks of a graph.
type GraphEdge struct {
	Upstream        string         `json:"upstream"`
	Downstream      string         `json:"downstream"`
	RequiresSuccess bool           `json:"requires_success"`
	Resolution      EdgeResolution `json:"resolution"`
}

// TaskGraph is tasks with the dependencies between them. A cascade-blocked
// task's root cause is included even when the query would leave it out,
// so that the graph shows where a broken chain starts.
type TaskGraph struct {
	Tasks []Task      `json:"tasks"`
	Edges []GraphEdge `json:"edges"`
	// Truncated says MaxGraphTasks tasks were reached and more were left
	// out.
	Truncated bool `json:"truncated"`
}
