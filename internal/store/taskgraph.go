package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// graphChunk is how many ids one IN (...) list of the graph's queries
// holds (SQLite's limit on parameters is far above it).
const graphChunk = 500

// qOpenWork lists a project's open tasks (not COMPLETED) in submission order.
const qOpenWork = `SELECT ` + taskColumns + ` FROM tasks WHERE project_id = ? AND status <> 'COMPLETED' ORDER BY submission_seq LIMIT ?`

// qNeighbourhood lists a task and the tasks up to a depth of edges above
// and below it (arguments: id, depth, id, depth, limit).
const qNeighbourhood = `WITH RECURSIVE
	up(id, depth) AS (SELECT ?, 0 UNION SELECT d.upstream, up.depth + 1 FROM task_dependencies d JOIN up ON d.downstream = up.id WHERE up.depth < ?),
	down(id, depth) AS (SELECT ?, 0 UNION SELECT d.downstream, down.depth + 1 FROM task_dependencies d JOIN down ON d.upstream = down.id WHERE down.depth < ?)
	SELECT id FROM up UNION SELECT id FROM down LIMIT ?`

// TaskGraph returns a project's open work, or a task's neighbourhood,
// with the edges between its tasks and the root causes of its
// cascade-blocked tasks, from one snapshot, at most MaxGraphTasks tasks.
func (s *Store) TaskGraph(ctx context.Context, q models.TaskGraphQuery) (models.TaskGraph, error) {
	if err := q.Validate(); err != nil {
		return models.TaskGraph{}, err
	}
	what := "project " + q.ProjectID
	if q.Around != "" {
		what = "task " + q.Around
	}
	fail := func(err error) (models.TaskGraph, error) {
		return models.TaskGraph{}, fmt.Errorf("task graph of %s: %w", what, err)
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	g := models.TaskGraph{Tasks: []models.Task{}, Edges: []models.GraphEdge{}}
	if q.ProjectID != "" {
		if err := projectExists(ctx, tx, q.ProjectID); err != nil {
			return models.TaskGraph{}, err
		}
		if g.Tasks, err = graphTasks(ctx, tx, qOpenWork, q.ProjectID, models.MaxGraphTasks+1); err != nil {
			return fail(err)
		}
	} else {
		if _, err := getTask(ctx, tx, q.Around); err != nil {
			return models.TaskGraph{}, err
		}
		depth := q.Depth
		if depth == 0 {
			depth = models.DefaultGraphDepth
		}
		ids, err := queryIDs(ctx, tx, qNeighbourhood, q.Around, depth, q.Around, depth, models.MaxGraphTasks+1)
		if err != nil {
			return fail(err)
		}
		if g.Tasks, err = graphTasksByID(ctx, tx, ids); err != nil {
			return fail(err)
		}
	}
	if len(g.Tasks) > models.MaxGraphTasks {
		g.Tasks, g.Truncated = g.Tasks[:models.MaxGraphTasks], true
	}
	in := make(map[string]bool, len(g.Tasks))
	for _, t := range g.Tasks {
		in[t.ID] = true
	}
	var roots []string
	for _, t := range g.Tasks {
		if r := t.CascadeRootID; r != "" && !in[r] {
			in[r] = true
			roots = append(roots, r)
		}
	}
	more, err := graphTasksByID(ctx, tx, roots)
	if err != nil {
		return fail(err)
	}
	g.Tasks = append(g.Tasks, more...)
	ids := make([]string, len(g.Tasks))
	for i, t := range g.Tasks {
		ids[i] = t.ID
	}
	for chunk := range slices.Chunk(ids, graphChunk) {
		rows, err := tx.QueryContext(ctx, `SELECT upstream, downstream, requires_success, resolution FROM task_dependencies
			WHERE downstream IN (`+graphMarks(len(chunk))+`) ORDER BY downstream, upstream`, graphArgs(chunk)...)
		if err != nil {
			return fail(err)
		}
		for rows.Next() {
			var e models.GraphEdge
			if err := rows.Scan(&e.Upstream, &e.Downstream, &e.RequiresSuccess, &e.Resolution); err != nil {
				rows.Close()
				return fail(err)
			}
			if in[e.Upstream] {
				g.Edges = append(g.Edges, e)
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fail(err)
		}
	}
	return g, nil
}

func projectExists(ctx context.Context, q queryer, id string) error {
	var n int
	if err := q.QueryRowContext(ctx, "SELECT count(*) FROM projects WHERE id = ?", id).Scan(&n); err != nil {
		return fmt.Errorf("find project %s: %w", id, err)
	}
	if n == 0 {
		return notFound("project", id)
	}
	return nil
}

func graphTasks(ctx context.Context, q queryer, query string, args ...any) ([]models.Task, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []models.Task{}
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// graphTasksByID reads the tasks of ids in submission order.
func graphTasksByID(ctx context.Context, q queryer, ids []string) ([]models.Task, error) {
	out := []models.Task{}
	for chunk := range slices.Chunk(ids, graphChunk) {
		ts, err := graphTasks(ctx, q, "SELECT "+taskColumns+" FROM tasks WHERE id IN ("+graphMarks(len(chunk))+") ORDER BY submission_seq", graphArgs(chunk)...)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

func graphMarks(n int) string { return strings.TrimSuffix(strings.Repeat("?,", n), ",") }

func graphArgs(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// qPendingEdges lists the undecided (PENDING) edges into the tasks whose
// ids are in ?1 (a JSON array), each task's in its upstreams' creation
// order.
const qPendingEdges = `SELECT d.downstream, d.upstream FROM task_dependencies d JOIN tasks u ON u.id = d.upstream
	WHERE d.downstream IN (SELECT value FROM json_each(?1)) AND d.resolution = 'PENDING'
	ORDER BY d.downstream, u.rowid`

// PendingUpstreams returns, for each of the tasks ids that has some, the
// upstreams whose edges into it are still undecided (PENDING): what a
// DEFINED task waits for. Tasks without one are left out.
func (s *Store) PendingUpstreams(ctx context.Context, ids []string) (map[string][]models.Task, error) {
	out := map[string][]models.Task{}
	if len(ids) == 0 {
		return out, nil
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("pending upstreams: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	type edge struct{ down, up string }
	edges, err := queryAll(ctx, tx, func(r scanner) (edge, error) {
		var e edge
		return e, r.Scan(&e.down, &e.up)
	}, qPendingEdges, batchArg(ids))
	if err != nil {
		return nil, fmt.Errorf("pending upstreams: %w", err)
	}
	if len(edges) == 0 {
		return out, nil
	}
	var ups []string
	for _, e := range edges {
		if !slices.Contains(ups, e.up) {
			ups = append(ups, e.up)
		}
	}
	tasks, err := queryAll(ctx, tx, scanTask, qBatchTasks, batchArg(ups))
	if err != nil {
		return nil, fmt.Errorf("pending upstreams: %w", err)
	}
	byID := make(map[string]models.Task, len(tasks))
	for _, t := range tasks {
		byID[t.ID] = t
	}
	for _, e := range edges {
		if t, ok := byID[e.up]; ok {
			out[e.down] = append(out[e.down], t)
		}
	}
	return out, nil
}
