package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/statemachine"
)

// entry is a batch entry on its way into the database.
type entry struct {
	index int
	src   models.BatchTask
	task  models.Task
	// deps are the entry's resolved upstreams.
	deps []resolvedDep
	// skippedAs is the existing task a dedupe strategy matched.
	skippedAs string
	// dupOf is the earlier entry of the batch a dedupe strategy matched, or -1.
	dupOf    int
	statuses [][]models.TaskStatus
}

// resolvedDep is one upstream of a batch entry: another entry of the batch
// (local ≥ 0) or an existing task (local < 0, id set).
type resolvedDep struct {
	local    int
	id       string
	required bool
}

// node names the upstream in the cycle check's graph. Task ids never start
// with '#', so entry nodes cannot collide with them.
func (d resolvedDep) node() string {
	if d.local >= 0 {
		return nodeOf(d.local)
	}
	return d.id
}

func nodeOf(i int) string { return "#" + strconv.Itoa(i) }

// skipped reports whether a dedupe strategy matched the entry.
func (e *entry) skipped() bool { return e.skippedAs != "" || e.dupOf >= 0 }

// CreateTasks creates a batch of tasks all-or-nothing: every entry is
// validated, dedupe strategies are applied, dependencies are resolved (local
// ids first, then existing task ids), the whole graph — new edges and the
// existing edges upstream of them — is checked for cycles, and each new task
// starts READY when none of its dependencies is unmet, else DEFINED (BLOCKED
// at once when a required upstream is already BLOCKED).
func (s *Store) CreateTasks(ctx context.Context, b models.TaskBatch) ([]models.BatchResult, error) {
	entries, err := prepareBatch(b)
	if err != nil {
		return nil, err
	}
	var results []models.BatchResult
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		var err error
		results, err = s.newTxn(ctx, tx).createBatch(entries)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create tasks: %w", err)
	}
	s.changed()
	return results, nil
}

// createBatch creates prepared entries inside the transaction and answers
// one result per entry.
func (x *txn) createBatch(entries []*entry) ([]models.BatchResult, error) {
	var results []models.BatchResult
	if err := x.checkProjects(entries); err != nil {
		return nil, err
	}
	if err := x.dedupe(entries); err != nil {
		return nil, err
	}
	if err := x.checkRules(entries); err != nil {
		return nil, err
	}
	if err := x.resolveDeps(entries); err != nil {
		return nil, err
	}
	if err := x.checkCycles(entries); err != nil {
		return nil, err
	}
	if err := x.insert(entries); err != nil {
		return nil, err
	}
	results = make([]models.BatchResult, len(entries))
	for i, e := range entries {
		switch {
		case e.skippedAs != "":
			results[i] = models.BatchResult{TaskID: e.skippedAs, Skipped: true}
			continue
		case e.dupOf >= 0:
			results[i] = models.BatchResult{TaskID: entries[e.dupOf].task.ID, Skipped: true}
			continue
		}
		if _, err := x.run(change{taskID: e.task.ID, event: evalEvent, followUp: true}); err != nil {
			return nil, fmt.Errorf("evaluate task %s: %w", e.task.ID, err)
		}
	}
	for i := range results {
		id := results[i].TaskID
		if id == "" {
			id = entries[i].task.ID
		}
		var st models.TaskStatus
		if err := x.QueryRowContext(x.ctx, "SELECT status FROM tasks WHERE id = ?", id).Scan(&st); err != nil {
			return nil, err
		}
		results[i].LocalID, results[i].TaskID, results[i].Status = entries[i].src.LocalID, id, st
	}
	// Tasks created behind a BLOCKED upstream: one notice for the batch.
	if err := x.noticeBlockedChain("created"); err != nil {
		return nil, err
	}
	return results, nil
}

// prepareBatch validates each entry on its own and builds its task.
func prepareBatch(b models.TaskBatch) ([]*entry, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	locals := make(map[string]int, len(b.Tasks))
	entries := make([]*entry, len(b.Tasks))
	for i, bt := range b.Tasks {
		// The entry's name is formatted only for an error.
		where := func() string {
			if bt.LocalID != "" {
				return fmt.Sprintf("tasks[%d] (%s)", i, bt.LocalID)
			}
			return fmt.Sprintf("tasks[%d]", i)
		}
		if bt.LocalID != "" {
			if j, dup := locals[bt.LocalID]; dup {
				return nil, models.Errorf(models.CodeInvalid, "%s: id %q is already used by tasks[%d]", where(), bt.LocalID, j)
			}
			locals[bt.LocalID] = i
		}
		t := bt.Task(b.ProjectID, b.CreatedBy)
		if t.ProjectID == "" {
			return nil, models.Errorf(models.CodeInvalid, "%s: project_id: required (on the task or the batch)", where())
		}
		if err := t.Validate(); err != nil {
			return nil, models.WrapError(models.CodeInvalid, err, "%s: %s", where(), models.ErrorMessageOf(err))
		}
		e := &entry{index: i, src: bt, task: t, dupOf: -1}
		for j, st := range bt.DedupeStrategy {
			if firstNonEmpty(st.Kind, bt.Kind) == "" && len(st.Fields) == 0 {
				return nil, models.Errorf(models.CodeInvalid, "%s: dedupe_strategy[%d]: name a kind or fields to match on", where(), j)
			}
			set, err := models.ResolveStatusSet(st.Status)
			if err != nil {
				return nil, models.WrapError(models.CodeInvalid, err, "%s: dedupe_strategy[%d]: %s", where(), j, models.ErrorMessageOf(err))
			}
			e.statuses = append(e.statuses, set)
		}
		if len(bt.Dependencies) > models.MaxDependencies {
			return nil, models.Errorf(models.CodeInvalid, "%s: dependencies: at most %d", where(), models.MaxDependencies)
		}
		entries[i] = e
	}
	// Resolve local references now; the rest must be existing tasks.
	for _, e := range entries {
		seen := map[string]bool{}
		for j, d := range e.src.Dependencies {
			where := func() string { return fmt.Sprintf("tasks[%d].dependencies[%d]", e.index, j) }
			if d.ID == "" {
				return nil, models.Errorf(models.CodeInvalid, "%s: id: required", where())
			}
			if seen[d.ID] {
				return nil, models.Errorf(models.CodeInvalid, "%s: %q is listed twice", where(), d.ID)
			}
			seen[d.ID] = true
			if k, ok := locals[d.ID]; ok {
				if k == e.index {
					return nil, models.Errorf(models.CodeInvalid, "%s: a task cannot depend on itself (%s -> %s)", where(), d.ID, d.ID)
				}
				e.deps = append(e.deps, resolvedDep{local: k, required: d.Required()})
			} else {
				if !models.ValidTaskID(d.ID) {
					return nil, models.Errorf(models.CodeInvalid, "%s: %q is neither a task id nor an id of this batch", where(), d.ID)
				}
				e.deps = append(e.deps, resolvedDep{local: -1, id: d.ID, required: d.Required()})
			}
		}
	}
	return entries, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkProjects refuses entries of unknown or archived projects, and repos
// that are not their project's.
func (x *txn) checkProjects(entries []*entry) error {
	known := map[string]bool{}
	hasRepo := map[string]bool{}
	for _, e := range entries {
		pid := e.task.ProjectID
		if e.task.RequiresApproval {
			ok, seen := hasRepo[pid]
			if !seen {
				var err error
				if ok, err = projectHasRepo(x.ctx, x, pid); err != nil {
					return err
				}
				hasRepo[pid] = ok
			}
			if !ok {
				return noApprovalPath(fmt.Sprintf("tasks[%d]", e.index), pid)
			}
		}
		if e.task.RepoID != nil {
			var owner string
			err := x.QueryRowContext(x.ctx, qRepoOwner, *e.task.RepoID).Scan(&owner)
			if errors.Is(err, sql.ErrNoRows) || (err == nil && owner != pid) {
				return models.Errorf(models.CodeInvalid, "tasks[%d]: repo_id %q is not a repo of project %q", e.index, *e.task.RepoID, pid)
			}
			if err != nil {
				return err
			}
		}
		if known[pid] {
			continue
		}
		var status models.ProjectStatus
		err := x.QueryRowContext(x.ctx, qProjectStatus, pid).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			return models.Errorf(models.CodeNotFound, "tasks[%d]: project %q not found", e.index, pid)
		}
		if err != nil {
			return err
		}
		if status == models.ProjectArchived {
			return models.Errorf(models.CodeConflict, "tasks[%d]: project %q is archived", e.index, pid)
		}
		known[pid] = true
	}
	return nil
}

// qProjectHasRepo reports whether a project has a repository.
const qProjectHasRepo = "SELECT EXISTS (SELECT 1 FROM repos WHERE project_id = ?)"

// projectHasRepo reports whether a project has a repository: the only way
// its tasks can wait for a person's approval of their work, through a pull
// request or, without one, in AWAITING_APPROVAL with the branch's diff.
// A project that does not exist has none; the caller names that error.
func projectHasRepo(ctx context.Context, q queryer, projectID string) (bool, error) {
	var ok bool
	if err := q.QueryRowContext(ctx, qProjectHasRepo, projectID).Scan(&ok); err != nil {
		return false, fmt.Errorf("repository of project %s: %w", projectID, err)
	}
	return ok, nil
}

// noApprovalPath is the refusal of a task that requires approval in a
// project that cannot wait for one.
func noApprovalPath(where, projectID string) error {
	return models.Errorf(models.CodeInvalid, "%s: requires_approval: project %q has no repository, so no change of the task "+
		"can wait for a person's approval (a pull request or a diff to approve); give the project a repository, or clear requires_approval",
		where, projectID)
}

// dedupe marks entries that match an existing task, or an earlier entry of
// the same batch, under one of their strategies.
func (x *txn) dedupe(entries []*entry) error {
	predicted := map[int]models.TaskStatus{}
	for _, e := range entries {
	strategies:
		for j, st := range e.src.DedupeStrategy {
			kind := firstNonEmpty(st.Kind, e.task.Kind)
			// An earlier entry matches like an existing task would, in the
			// status it is about to start in.
			for _, prev := range entries[:e.index] {
				if prev.skipped() || prev.task.ProjectID != e.task.ProjectID || !prev.task.MatchesFields(kind, e.task.Metadata, st.Fields) {
					continue
				}
				start, err := x.predictStatus(entries, prev.index, predicted)
				if err != nil {
					return err
				}
				if containsStatus(e.statuses[j], start) {
					e.dupOf = prev.index
					break strategies
				}
			}
			marks := strings.TrimSuffix(strings.Repeat("?,", len(e.statuses[j])), ",")
			args := []any{e.task.ProjectID, kind}
			for _, s := range e.statuses[j] {
				args = append(args, s)
			}
			rows, err := x.QueryContext(x.ctx, "SELECT "+taskColumns+` FROM tasks WHERE project_id = ? AND kind = ?
				AND status IN (`+marks+`) ORDER BY submission_seq`, args...)
			if err != nil {
				return err
			}
			for rows.Next() {
				t, err := scanTask(rows)
				if err != nil {
					rows.Close()
					return err
				}
				if t.MatchesFields(kind, e.task.Metadata, st.Fields) {
					e.skippedAs = t.ID
					rows.Close()
					break strategies
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
	}
	return nil
}

// predictStatus says which status batch entry i will start in: BLOCKED when
// an upstream its edge requires to succeed is (or starts) BLOCKED, READY when
// every upstream has already finished in a way that satisfies its edge, else
// DEFINED.
func (x *txn) predictStatus(entries []*entry, i int, memo map[int]models.TaskStatus) (models.TaskStatus, error) {
	if st, ok := memo[i]; ok {
		return st, nil
	}
	memo[i] = models.StatusDefined // a cycle is refused later; this only stops the recursion
	satisfied := true
	for _, d := range entries[i].deps {
		var up models.TaskStatus
		id := d.id
		if d.local >= 0 {
			id = entries[d.local].skippedAs
		}
		if id == "" {
			st, err := x.predictStatus(entries, d.local, memo)
			if err != nil {
				return "", err
			}
			up = st
		} else {
			err := x.QueryRowContext(x.ctx, qTaskStatus, id).Scan(&up)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return "", err
			}
		}
		switch {
		case up == models.StatusBlocked && d.required:
			memo[i] = models.StatusBlocked
			return models.StatusBlocked, nil
		case up == models.StatusCompleted || up == models.StatusBlocked:
		default:
			satisfied = false
		}
	}
	if satisfied {
		memo[i] = models.StatusReady
	}
	return memo[i], nil
}

func containsStatus(set []models.TaskStatus, s models.TaskStatus) bool {
	for _, v := range set {
		if v == s {
			return true
		}
	}
	return false
}

// resolveDeps checks that non-local dependencies exist and maps references
// to deduped entries onto the existing tasks they matched.
//
// A dependency on an archived task is met when that task was archived
// COMPLETED (or finished at all, for an edge not requiring success): no
// edge is made, as for an upstream that completed long ago. Any other is
// a conflict, since an archived task never changes again.
func (x *txn) resolveDeps(entries []*entry) error {
	exists := map[string]bool{}
	archived := map[string]bool{} // archived id → archived COMPLETED
	for _, e := range entries {
		for j, d := range e.deps {
			if d.local >= 0 {
				if up := entries[d.local]; up.skippedAs != "" {
					e.deps[j] = resolvedDep{local: -1, id: up.skippedAs, required: d.required}
				} else if up.dupOf >= 0 {
					if up.dupOf == e.index {
						return models.Errorf(models.CodeInvalid,
							"tasks[%d].dependencies[%d]: %q is a duplicate of this very task under its dedupe strategy",
							e.index, j, up.src.LocalID)
					}
					e.deps[j].local = up.dupOf
				}
				continue
			}
			if _, ok := archived[d.id]; exists[d.id] || ok {
				continue
			}
			var one int
			err := x.QueryRowContext(x.ctx, qTaskExists, d.id).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				was, completed, aerr := archivedUpstream(x.ctx, x, d.id)
				if aerr != nil {
					return aerr
				}
				if was {
					archived[d.id] = completed
					continue
				}
				return models.Errorf(models.CodeNotFound, "tasks[%d].dependencies[%d]: no task or batch entry %q", e.index, j, d.id)
			}
			if err != nil {
				return err
			}
			exists[d.id] = true
		}
		kept := e.deps[:0:0]
		for j, d := range e.deps {
			completed, was := archived[d.id]
			switch {
			case d.local >= 0 || !was:
				kept = append(kept, d)
			case !completed && d.required:
				return models.Errorf(models.CodeConflict, "tasks[%d].dependencies[%d]: task %q was archived "+
					"BLOCKED: a dependency requiring its success can never be met", e.index, j, d.id)
			}
		}
		e.deps = mergeDeps(kept)
	}
	return nil
}

// mergeDeps folds edges that dedupe made point at the same upstream into one,
// requiring success when any of them did.
func mergeDeps(deps []resolvedDep) []resolvedDep {
	out := deps[:0]
	at := map[string]int{}
	for _, d := range deps {
		if k, ok := at[d.node()]; ok {
			out[k].required = out[k].required || d.required
			continue
		}
		at[d.node()] = len(out)
		out = append(out, d)
	}
	return out
}

// checkCycles validates the graph of the new entries together with the
// existing edges upstream of the tasks they depend on.
func (x *txn) checkCycles(entries []*entry) error {
	graph := make(map[string][]string, len(entries))
	var roots []string
	for _, e := range entries {
		if e.skipped() {
			continue
		}
		n := nodeOf(e.index)
		for _, d := range e.deps {
			graph[n] = append(graph[n], d.node())
			if d.local < 0 {
				roots = append(roots, d.id)
			}
		}
	}
	if err := x.loadUpstreamClosure(roots, graph); err != nil {
		return err
	}
	err := statemachine.ValidateDAG(graph)
	var cyc *statemachine.CyclicDependencyError
	if errors.As(err, &cyc) {
		name := func(n string) string {
			var k int
			if _, err := fmt.Sscanf(n, "#%d", &k); err == nil && strings.HasPrefix(n, "#") {
				if id := entries[k].src.LocalID; id != "" {
					return id
				}
				return fmt.Sprintf("tasks[%d]", k)
			}
			return n
		}
		return models.WrapError(models.CodeInvalid, err, "dependency cycle: %s -> %s", name(cyc.From), name(cyc.To))
	}
	return err
}

// loadUpstreamClosure adds to graph every existing edge reachable upstream
// from roots.
func (x *txn) loadUpstreamClosure(roots []string, graph map[string][]string) error {
	seen := map[string]bool{}
	frontier := roots
	for len(frontier) > 0 {
		var next []string
		for _, id := range frontier {
			if seen[id] {
				continue
			}
			seen[id] = true
			rows, err := x.QueryContext(x.ctx, qUpstreams, id)
			if err != nil {
				return err
			}
			for rows.Next() {
				var up string
				if err := rows.Scan(&up); err != nil {
					rows.Close()
					return err
				}
				graph[id] = append(graph[id], up)
				next = append(next, up)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		frontier = next
	}
	return nil
}

// Statements of the task numbers (migration 0032): the last number given,
// read and written once per batch. The insert trigger numbers a task
// inserted without one.
const (
	qLastSubmission    = "SELECT n FROM task_sequence WHERE id = 1"
	qSetLastSubmission = "UPDATE task_sequence SET n = ? WHERE id = 1"
)

// insert names, numbers (submission_seq, in the entries' order) and inserts
// the new tasks as DEFINED with their edges, resolving edges whose upstream
// has already finished.
func (x *txn) insert(entries []*entry) error {
	taken := map[string]bool{}
	var seq int64
	if err := x.QueryRowContext(x.ctx, qLastSubmission).Scan(&seq); err != nil {
		return fmt.Errorf("read the last task number: %w", err)
	}
	first := seq
	// The transaction's statements (see txn.stmt): prepared once for the
	// store, closed with the transaction.
	// An archived task keeps its id: a new task never takes it.
	exists, err := x.stmt("SELECT (SELECT count(*) FROM tasks WHERE id = ?1) + (SELECT count(*) FROM archived_tasks WHERE id = ?1)")
	if err != nil {
		return err
	}
	// Names first, then the rows: many rows per statement, so that a batch
	// of thousands costs tens of statements, not thousands.
	var rows []*entry
	for _, e := range entries {
		if e.skipped() {
			continue
		}
		id, err := models.UniqueTaskName(x.s.rnd, func(name string) (bool, error) {
			if taken[name] {
				return true, nil
			}
			var n int
			err := exists.QueryRowContext(x.ctx, name).Scan(&n)
			return n > 0, err
		})
		if err != nil {
			return err
		}
		taken[id] = true
		t := &e.task
		seq++
		t.ID, t.Status, t.CreatedAt, t.UpdatedAt, t.SubmissionSeq = id, models.StatusDefined, x.now, x.now, seq
		rows = append(rows, e)
	}
	if err := x.insertTaskRows(rows); err != nil {
		return err
	}
	if seq != first {
		if _, err := x.ExecContext(x.ctx, qSetLastSubmission, seq); err != nil {
			return fmt.Errorf("write the last task number: %w", err)
		}
	}
	// An edge to an entry of the batch is PENDING (its upstream is new and
	// DEFINED): the columns' defaults, inserted many per statement. An edge
	// to an existing task is resolved against that task's state.
	var local []pendingEdge
	edge, err := x.stmt(qInsertEdge)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.skipped() {
			continue
		}
		for _, d := range e.deps {
			if d.local >= 0 {
				local = append(local, pendingEdge{e.task.ID, entries[d.local].task.ID, d.required})
				continue
			}
			if _, err := edge.ExecContext(x.ctx, e.task.ID, d.required, d.required, toNanos(x.now), d.id); err != nil {
				return err
			}
		}
	}
	return x.insertPendingEdges(local)
}

// taskInsertColumns are the columns a new task is inserted with, in the
// order of taskInsertArgs.
const taskInsertColumns = `id, project_id, title, description, priority, status,
		verification_type, retry_count, max_retries, parent_task_id, repo_id, requires_approval, plan_source,
		is_plan_subtask, kind, metadata, created_by, not_before, expected_count, acceptance_criteria, test_commands,
		created_at, updated_at, profile, workflow_run_id, step_name, parallel_index, parallel_count, step_concurrency, rules, timeout_ns,
		agent_type, submission_seq`

// taskInsertWidth is the number of columns in taskInsertColumns.
const taskInsertWidth = 33

// rowsPerInsert bounds the rows of one multi-row INSERT: 100 tasks are
// 3,300 parameters, well below SQLite's limit of 32,766.
const rowsPerInsert = 100

// chunkLen is the rows of the next INSERT when n are left: rowsPerInsert,
// and the rest one by one. Only two texts per table are ever prepared, so
// the store's statement cache does not fill with one per tail length.
func chunkLen(n int) int {
	if n >= rowsPerInsert {
		return rowsPerInsert
	}
	return 1
}

// insertTaskRows inserts the named entries' tasks, rowsPerInsert per
// statement (see chunkLen). A chunk refused for a missing parent is inserted again row
// by row (the failed statement wrote nothing) to name the entry at fault.
func (x *txn) insertTaskRows(rows []*entry) error {
	args := make([]any, 0, rowsPerInsert*taskInsertWidth)
	for len(rows) > 0 {
		chunk := rows[:chunkLen(len(rows))]
		rows = rows[len(chunk):]
		args = args[:0]
		for _, e := range chunk {
			args = x.taskInsertArgs(args, &e.task)
		}
		err := x.execRows(`INSERT INTO tasks (`+taskInsertColumns+`) VALUES `, taskInsertWidth, len(chunk), args)
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "FOREIGN KEY") {
			return err
		}
		for _, e := range chunk {
			if err := x.execRows(`INSERT INTO tasks (`+taskInsertColumns+`) VALUES `, taskInsertWidth, 1,
				x.taskInsertArgs(args[:0], &e.task)); err != nil {
				if strings.Contains(err.Error(), "FOREIGN KEY") {
					return models.Errorf(models.CodeNotFound, "tasks[%d]: parent_task_id %q not found", e.index, e.src.ParentTaskID)
				}
				return err
			}
		}
	}
	return nil
}

// taskInsertArgs appends t's values for taskInsertColumns to args.
func (x *txn) taskInsertArgs(args []any, t *models.Task) []any {
	return append(args, t.ID, t.ProjectID, t.Title, t.Description, t.Priority, t.Status,
		t.VerificationType, t.RetryCount, t.MaxRetries, nullString(t.ParentTaskID), nullString(t.RepoID),
		t.RequiresApproval, nullString(t.PlanSource), t.IsPlanSubtask, t.Kind, encodeMetadata(t.Metadata),
		t.CreatedBy, nullNanos(t.NotBefore), t.ExpectedCount, encodeStrings(t.AcceptanceCriteria),
		encodeStrings(t.TestCommands), toNanos(x.now), toNanos(x.now), t.Profile, emptyToNull(t.RunID),
		t.StepName, t.ParallelIndex, t.ParallelCount, t.StepConcurrency, encodeRules(t.Rules),
		int64(t.Timeout), t.AgentType, t.SubmissionSeq)
}

// pendingEdge is an edge between two entries of a batch.
type pendingEdge struct {
	down, up string
	required bool
}

// insertPendingEdges inserts edges with the columns' defaults (PENDING,
// unresolved), rowsPerInsert per statement (see chunkLen).
func (x *txn) insertPendingEdges(edges []pendingEdge) error {
	const width = 3
	// In the primary key's order, each row lands beside the one before.
	slices.SortFunc(edges, func(a, b pendingEdge) int {
		return cmp.Or(strings.Compare(a.down, b.down), strings.Compare(a.up, b.up))
	})
	args := make([]any, 0, rowsPerInsert*width)
	for len(edges) > 0 {
		chunk := edges[:chunkLen(len(edges))]
		edges = edges[len(chunk):]
		args = args[:0]
		for _, e := range chunk {
			args = append(args, e.down, e.up, e.required)
		}
		if err := x.execRows(`INSERT INTO task_dependencies (downstream, upstream, requires_success) VALUES `,
			width, len(chunk), args); err != nil {
			return err
		}
	}
	return nil
}

// execRows runs prefix followed by n rows of width parameters each, as a
// statement the transaction keeps prepared (one text per row count).
func (x *txn) execRows(prefix string, width, n int, args []any) error {
	st, err := x.stmt(multiRowSQL(prefix, width, n))
	if err != nil {
		return err
	}
	_, err = st.ExecContext(x.ctx, args...)
	return err
}

// multiRowSQL returns prefix followed by n groups of width placeholders.
func multiRowSQL(prefix string, width, n int) string {
	row := "(" + strings.Repeat("?,", width-1) + "?)"
	var b strings.Builder
	b.Grow(len(prefix) + n*(len(row)+1))
	b.WriteString(prefix)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	return b.String()
}

// encodeMetadata is encodeJSONColumn for a task's metadata, without
// marshalling when it is empty.
func encodeMetadata(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	return encodeJSONColumn(m, "{}")
}

// encodeStrings is encodeJSONColumn for a list of strings, without
// marshalling when it is empty.
func encodeStrings(l []string) string {
	if len(l) == 0 {
		return "[]"
	}
	return encodeJSONColumn(l, "[]")
}

// encodeRules is encodeJSONColumn for a task's rules, without marshalling
// when there are none.
func encodeRules(l []models.Rule) string {
	if len(l) == 0 {
		return "[]"
	}
	return encodeJSONColumn(l, "[]")
}
