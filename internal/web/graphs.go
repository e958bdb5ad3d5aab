package web

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/web/dag"
)

func init() {
	funcs["statusLegend"] = statusLegend
	funcs["graphFigure"] = graphFigure
	funcs["openCount"] = openCount
	funcs["maxLiveGraph"] = func() int { return MaxLiveGraphTasks }
	register(Page{Pattern: "GET " + Prefix + "/projects", Template: "projects", Nav: NavProjects, Load: (*Server).loadProjects},
		Page{Pattern: "GET " + Prefix + "/projects/{id}/dag", Template: "dag", Nav: NavProjects, Load: (*Server).loadProjectDAG})
}

// graphView is a drawn graph and what a page says about it.
type graphView struct {
	// SVG is the drawing; empty when the graph has no tasks.
	SVG template.HTML
	// Tasks and Edges count what is drawn; Truncated says tasks were left
	// out (models.MaxGraphTasks); RootCauses lists the cascades' roots.
	Tasks, Edges int
	Truncated    bool
	RootCauses   []models.Task
	// Base is the path the links are under (the session's: baseOf).
	Base string
}

// taskGraph draws a task graph: each task a box coloured by status that
// links to its page (under base, the session's: baseOf), each cascade's root cause outlined, focus (a task id,
// or "") drawn with a heavy border.
func taskGraph(g models.TaskGraph, focus, label, base string) (graphView, error) {
	roots := map[string]bool{}
	for _, t := range g.Tasks {
		if t.CascadeRootID != "" {
			roots[t.CascadeRootID] = true
		}
	}
	var in dag.Graph
	v := graphView{Tasks: len(g.Tasks), Edges: len(g.Edges), Truncated: g.Truncated, Base: base}
	for _, t := range g.Tasks {
		in.Nodes = append(in.Nodes, dag.Node{ID: t.ID, Label: t.Title, Href: base + "/tasks/" + t.ID,
			Status: t.Status, RootCause: roots[t.ID], Focus: t.ID == focus})
		if roots[t.ID] {
			v.RootCauses = append(v.RootCauses, t)
		}
	}
	// Edges in the tasks' order, not their ids' (random words): the same
	// work is drawn the same way whatever its tasks are called.
	pos := make(map[string]int, len(g.Tasks))
	for i, t := range g.Tasks {
		pos[t.ID] = i
	}
	edges := slices.Clone(g.Edges)
	slices.SortStableFunc(edges, func(a, b models.GraphEdge) int {
		return cmp.Or(cmp.Compare(pos[a.Downstream], pos[b.Downstream]), cmp.Compare(pos[a.Upstream], pos[b.Upstream]))
	})
	for _, e := range edges {
		in.Edges = append(in.Edges, dag.Edge{Upstream: e.Upstream, Downstream: e.Downstream, Soft: !e.RequiresSuccess})
	}
	if len(in.Nodes) == 0 {
		return v, nil
	}
	svg, err := drawGraph(in, label)
	v.SVG = svg
	return v, err
}

// drawGraph lays g out and writes it as inline SVG.
func drawGraph(g dag.Graph, label string) (template.HTML, error) {
	var b bytes.Buffer
	if err := dag.WriteSVG(&b, dag.Lay(g, dag.Options{}), label); err != nil {
		return "", fmt.Errorf("draw graph: %w", err)
	}
	return template.HTML(b.String()), nil //nolint:gosec // dag.WriteSVG escapes every text it writes
}

// statusLegend is the SVG legend of the status colours.
func statusLegend() template.HTML {
	var b bytes.Buffer
	_ = dag.WriteLegend(&b)          // writes to memory
	return template.HTML(b.String()) //nolint:gosec // constant text
}

// taskNeighbourhood draws the graph around a task for its page: its
// upstreams and dependents up to models.DefaultGraphDepth edges away and
// the root causes of the cascade-blocked ones. The Task page shows it
// with {{graphFigure .Data.Graph "..."}}; its boxes link under base.
func (s *Server) taskNeighbourhood(ctx context.Context, taskID, base string) (graphView, error) {
	g, err := s.svc.TaskGraph(ctx, models.TaskGraphQuery{Around: taskID})
	if err != nil {
		return graphView{}, fmt.Errorf("graph around task %s: %w", taskID, err)
	}
	return taskGraph(g, taskID, "dependencies of "+taskID, base)
}

// projectsPage is the data of the projects page.
type projectsPage struct {
	Projects []models.Project
	Counts   map[string]map[models.TaskStatus]int
}

func (s *Server) loadProjects(r *http.Request) (any, error) {
	ps, err := s.svc.ListProjects(r.Context())
	if err != nil {
		return nil, fmt.Errorf("projects: %w", err)
	}
	counts, err := s.svc.TaskCounts(r.Context())
	if err != nil {
		return nil, fmt.Errorf("projects: %w", err)
	}
	return projectsPage{Projects: ps, Counts: counts}, nil
}

// MaxLiveGraphTasks is the most tasks a project's graph may have and
// still be redrawn on each change of the daemon's state: a larger one is
// drawn when the page is read, and the page says to reload it to redraw.
const MaxLiveGraphTasks = 300

// dagPage is the data of a project's DAG page.
type dagPage struct {
	Project models.Project
	Graph   graphView
	Max     int
	// Live is false for a graph of more than MaxLiveGraphTasks tasks:
	// the page follows no changes.
	Live bool
}

// EventsURL is empty for a graph too large to redraw on each change:
// the page opens no event stream.
func (p dagPage) EventsURL() string {
	if !p.Live {
		return ""
	}
	return Prefix + "/events"
}

func (s *Server) loadProjectDAG(r *http.Request) (any, error) {
	ctx := r.Context()
	p, err := s.svc.GetProject(ctx, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	g, err := s.svc.TaskGraph(ctx, models.TaskGraphQuery{ProjectID: p.ID})
	if err != nil {
		return nil, err
	}
	v, err := taskGraph(g, "", "open work of project "+p.Name, baseOf(r))
	if err != nil {
		return nil, err
	}
	return dagPage{Project: p, Graph: v, Max: models.MaxGraphTasks, Live: v.Tasks <= MaxLiveGraphTasks}, nil
}

// figureTemplate shows a drawn graph: the drawing in a scrolling box, what
// it counts, the root causes named in text (for readers that do not see
// the colours) and a legend.
var figureTemplate = template.Must(template.New("figure").Funcs(template.FuncMap{"statusLegend": statusLegend}).Parse(
	`<figure class="graph">{{if .SVG}}<div class="graph-scroll" tabindex="0" role="group" aria-label="{{.Label}}">{{.SVG}}</div>` +
		`<figcaption>{{.Tasks}} task(s), {{.Edges}} dependenc{{if eq .Edges 1}}y{{else}}ies{{end}}; dashed arrows do not require success.` +
		`{{if .Truncated}} <strong>Only the first {{.Tasks}} tasks are drawn.</strong>{{end}}` +
		`{{with .RootCauses}} Root cause{{if gt (len .) 1}}s{{end}} of blocked chains, outlined:` +
		`{{range $i, $t := .}}{{if $i}},{{end}} <a class="root-cause" href="{{$.Base}}/tasks/{{$t.ID}}">{{$t.Title}}</a>{{end}}.{{end}}</figcaption>` +
		`<details class="legend"><summary>Colours</summary>{{statusLegend}}</details>` +
		`{{else}}<p class="muted">No tasks to draw.</p>{{end}}</figure>`))

// graphFigure is the HTML of a drawn graph for a page (the template
// function "graphFigure").
func graphFigure(v graphView, label string) (template.HTML, error) {
	var b bytes.Buffer
	data := struct {
		graphView
		Label string
	}{v, label}
	if err := figureTemplate.Execute(&b, data); err != nil {
		return "", fmt.Errorf("graph figure: %w", err)
	}
	return template.HTML(b.String()), nil //nolint:gosec // html/template's output
}

// openCount sums a project's task counts except COMPLETED.
func openCount(c map[models.TaskStatus]int) int {
	n := 0
	for st, k := range c {
		if st != models.StatusCompleted {
			n += k
		}
	}
	return n
}
