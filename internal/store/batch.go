package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

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
	// ready marks a new task inserted READY: every edge it has is
	// satisfied from the start (readyAtOnce).
	ready bool
}

// resolvedDep is one upstream of a batch entry: another entry of the batch
// (local ≥ 0) or an existing task (local < 0, id set).
type resolvedDep struct {
	local    int
	id       string
	required bool
}

// nodeOf names batch entry i in the cycle check's graph, where existing
// tasks go by their ids. Task ids never start with '#', so entry nodes
// cannot collide with them.
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
// TmpPhase is temporary.
var TmpPhase = func(string) {}

func (x *txn) createBatch(entries []*entry) ([]models.BatchResult, error) {
	var results []models.BatchResult
	TmpPhase("start")
	if err := x.checkProjects(entries); err != nil {
		return nil, err
	}
	if err := x.dedupe(entries); err != nil {
		return nil, err
	}
	if err := x.checkRules(entries); err != nil {
		return nil, err
	}
	TmpPhase("checks")
	upstream, err := x.resolveDeps(entries)
	if err != nil {
		return nil, err
	}
	TmpPhase("resolve")
	if err := x.checkCycles(entries); err != nil {
		return nil, err
	}
	TmpPhase("cycles")
	for _, e := range entries {
		e.ready = !e.skipped() && readyAtOnce(e, upstream)
	}
	if err := x.insert(entries, upstream); err != nil {
		return nil, err
	}
	known, err := x.evaluateNew(entries, upstream)
	if err != nil {
		return nil, err
	}
	TmpPhase("evaluate")
	results = make([]models.BatchResult, len(entries))
	var read []string // tasks whose status only the database knows
	for i, e := range entries {
		switch {
		case e.skippedAs != "":
			results[i] = models.BatchResult{TaskID: e.skippedAs, Skipped: true}
		case e.dupOf >= 0:
			results[i] = models.BatchResult{TaskID: entries[e.dupOf].task.ID, Skipped: true, Status: known[e.dupOf]}
		default:
			results[i] = models.BatchResult{TaskID: e.task.ID, Status: known[i]}
		}
		results[i].LocalID = e.src.LocalID
		if results[i].Status == "" {
			read = append(read, results[i].TaskID)
		}
	}
	statuses, err := x.taskStatuses(read)
	if err != nil {
		return nil, err
	}
	for i := range results {
		if results[i].Status != "" {
			continue
		}
		st, ok := statuses[results[i].TaskID]
		if !ok {
			return nil, fmt.Errorf("status of task %s: %w", results[i].TaskID, sql.ErrNoRows)
		}
		results[i].Status = st
	}
	// Tasks created behind a BLOCKED upstream: one notice for the batch.
	if err := x.noticeBlockedChain("created"); err != nil {
		return nil, err
	}
	TmpPhase("results")
	return results, nil
}

// readyAtOnce reports whether a new task's edges are all satisfied from
// the start — none to a task of the batch, each to an existing task that
// has COMPLETED, or is BLOCKED and the edge does not require success — so
// that its evaluation can only promote it. A workflow's task is left to
// its evaluation, which settles its run.
func readyAtOnce(e *entry, upstream map[string]models.TaskStatus) bool {
	if e.task.RunID != "" {
		return false
	}
	for _, d := range e.deps {
		if d.local >= 0 {
			return false
		}
		switch upstream[d.id] {
		case models.StatusCompleted:
		case models.StatusBlocked:
			if d.required {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// evaluateNew gives each new task, in the batch's order, the evaluation a
// task gets when its edges change (promotion, or the cascade of a BLOCKED
// upstream), with its events and follow-ups; the events and notices are
// those of evaluating every task in turn. Which tasks it changes is known
// beforehand from the batch's own graph and its upstreams' statuses
// (predictStatus): a task that starts DEFINED has an edge that stays
// PENDING and none BROKEN, and its evaluation would only read it. A task
// ready at once (readyAtOnce) was inserted READY with the reason a
// promotion gives: its promotion's event is written in its turn, many in
// one statement. The others are evaluated.
//
// It answers the status of each entry that these two kinds leave as they
// are (DEFINED, READY: nothing in the transaction changes them after),
// and "" for the tasks evaluated and the entries skipped.
func (x *txn) evaluateNew(entries []*entry, upstream map[string]models.TaskStatus) ([]models.TaskStatus, error) {
	known := make([]models.TaskStatus, len(entries))
	memo := make(map[int]models.TaskStatus, len(entries))
	var promoted []*entry // inserted READY, their events not written yet
	for _, e := range entries {
		if e.skipped() {
			continue
		}
		if e.ready {
			promoted = append(promoted, e)
			known[e.index] = models.StatusReady
			continue
		}
		st, err := x.predictStatus(entries, e.index, memo, upstream)
		if err != nil {
			return nil, err
		}
		if st == models.StatusDefined {
			known[e.index] = models.StatusDefined
			continue
		}
		if err := x.recordPromotions(promoted); err != nil {
			return nil, err
		}
		promoted = promoted[:0]
		if _, err := x.run(change{taskID: e.task.ID, event: evalEvent, followUp: true}); err != nil {
			return nil, fmt.Errorf("evaluate task %s: %w", e.task.ID, err)
		}
	}
	return known, x.recordPromotions(promoted)
}

// qInsertPromotions writes the DEPS_MET events of the tasks of a JSON
// array of ids, in its order: (ids, from, to, event, reason, actor, at).
const qInsertPromotions = `INSERT INTO task_events (task_id, from_status, to_status, event, reason, actor, created_at)
	SELECT value, ?2, ?3, ?4, ?5, ?6, ?7 FROM json_each(?1) ORDER BY key`

// recordPromotions records the promotion of new tasks inserted READY as
// their evaluation would have applied it (DEFINED → READY by DEPS_MET):
// the events, in one statement, and each change for the observer and
// the transaction's promoted tasks.
func (x *txn) recordPromotions(promoted []*entry) error {
	if len(promoted) == 0 {
		return nil
	}
	ids := make([]byte, 0, len(promoted)*16)
	ids = append(ids, '[')
	for i, e := range promoted {
		if i > 0 {
			ids = append(ids, ',')
		}
		ids = appendJSONString(ids, e.task.ID)
	}
	ids = append(ids, ']')
	if _, err := x.ExecContext(x.ctx, qInsertPromotions, string(ids), models.StatusDefined, models.StatusReady,
		models.EventDepsMet, depsMetReason, systemActor, toNanos(x.now)); err != nil {
		return fmt.Errorf("record promotions: %w", err)
	}
	for _, e := range promoted {
		cur := e.task
		cur.Status, cur.StatusReason = models.StatusDefined, ""
		if err := x.observeTransition(cur, models.StatusReady, models.EventDepsMet); err != nil {
			return err
		}
		x.promoted = append(x.promoted, e.task.ID)
	}
	x.changed = true
	return nil
}

// taskStatuses reads the status of each task of ids that exists.
func (x *txn) taskStatuses(ids []string) (map[string]models.TaskStatus, error) {
	out := make(map[string]models.TaskStatus, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	rows, err := x.QueryContext(x.ctx, qTaskStatuses, string(list))
	if err != nil {
		return nil, fmt.Errorf("read task statuses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var st models.TaskStatus
		if err := rows.Scan(&id, &st); err != nil {
			return nil, fmt.Errorf("read task statuses: %w", err)
		}
		out[id] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read task statuses: %w", err)
	}
	return out, nil
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
		deps := e.src.Dependencies
		var seen map[string]bool // for an entry of many dependencies
		if len(deps) > 0 {
			e.deps = make([]resolvedDep, 0, len(deps))
		}
		if len(deps) > fewDependencies {
			seen = make(map[string]bool, len(deps))
		}
		for j, d := range deps {
			where := func() string { return fmt.Sprintf("tasks[%d].dependencies[%d]", e.index, j) }
			if d.ID == "" {
				return nil, models.Errorf(models.CodeInvalid, "%s: id: required", where())
			}
			if listedBefore(deps, j, seen) {
				return nil, models.Errorf(models.CodeInvalid, "%s: %q is listed twice", where(), d.ID)
			}
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

// fewDependencies is the most dependencies of an entry that are checked
// for repeats by comparing each with those before it; an entry of more
// (up to models.MaxDependencies) is checked through a set.
const fewDependencies = 16

// listedBefore reports whether deps[j]'s id is an earlier dependency's,
// adding it to seen when the entry has one (more than fewDependencies):
// most entries have a few dependencies, and a set for each would be most
// of a large batch's allocations.
func listedBefore(deps []models.BatchDependency, j int, seen map[string]bool) bool {
	id := deps[j].ID
	if seen != nil {
		if seen[id] {
			return true
		}
		seen[id] = true
		return false
	}
	for _, d := range deps[:j] {
		if d.ID == id {
			return true
		}
	}
	return false
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
	known := map[string]models.TaskStatus{}
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
				start, err := x.predictStatus(entries, prev.index, predicted, known)
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
// DEFINED. The statuses of existing upstreams are taken from known, and
// those it lacks read and added to it.
func (x *txn) predictStatus(entries []*entry, i int, memo map[int]models.TaskStatus,
	known map[string]models.TaskStatus) (models.TaskStatus, error) {
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
			st, err := x.predictStatus(entries, d.local, memo, known)
			if err != nil {
				return "", err
			}
			up = st
		} else if st, ok := known[id]; ok {
			up = st
		} else {
			err := x.QueryRowContext(x.ctx, qTaskStatus, id).Scan(&up)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return "", err
			}
			known[id] = up
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
// to deduped entries onto the existing tasks they matched. It answers the
// status of every existing task an entry now depends on, read in one
// statement: references to entries of the batch need none.
//
// A dependency on an archived task is met when that task was archived
// COMPLETED (or finished at all, for an edge not requiring success): no
// edge is made, as for an upstream that completed long ago. Any other is
// a conflict, since an archived task never changes again.
func (x *txn) resolveDeps(entries []*entry) (map[string]models.TaskStatus, error) {
	var outside []string
	listed := map[string]bool{}
	for _, e := range entries {
		if e.skippedAs != "" && !listed[e.skippedAs] {
			listed[e.skippedAs] = true
			outside = append(outside, e.skippedAs)
		}
		for _, d := range e.deps {
			if d.local < 0 && !listed[d.id] {
				listed[d.id] = true
				outside = append(outside, d.id)
			}
		}
	}
	exists, err := x.taskStatuses(outside)
	if err != nil {
		return nil, err
	}
	archived := map[string]bool{} // archived id → archived COMPLETED
	for _, e := range entries {
		for j, d := range e.deps {
			if d.local >= 0 {
				if up := entries[d.local]; up.skippedAs != "" {
					e.deps[j] = resolvedDep{local: -1, id: up.skippedAs, required: d.required}
				} else if up.dupOf >= 0 {
					if up.dupOf == e.index {
						return nil, models.Errorf(models.CodeInvalid,
							"tasks[%d].dependencies[%d]: %q is a duplicate of this very task under its dedupe strategy",
							e.index, j, up.src.LocalID)
					}
					e.deps[j].local = up.dupOf
				}
				continue
			}
			if _, ok := exists[d.id]; ok {
				continue
			}
			if _, ok := archived[d.id]; ok {
				continue
			}
			was, completed, err := archivedUpstream(x.ctx, x, d.id)
			if err != nil {
				return nil, err
			}
			if !was {
				return nil, models.Errorf(models.CodeNotFound, "tasks[%d].dependencies[%d]: no task or batch entry %q", e.index, j, d.id)
			}
			archived[d.id] = completed
		}
		kept := e.deps[:0:0]
		for j, d := range e.deps {
			completed, was := archived[d.id]
			switch {
			case d.local >= 0 || !was:
				kept = append(kept, d)
			case !completed && d.required:
				return nil, models.Errorf(models.CodeConflict, "tasks[%d].dependencies[%d]: task %q was archived "+
					"BLOCKED: a dependency requiring its success can never be met", e.index, j, d.id)
			}
		}
		e.deps = mergeDeps(kept)
	}
	return exists, nil
}

// mergeDeps folds edges that dedupe made point at the same upstream into one,
// requiring success when any of them did.
func mergeDeps(deps []resolvedDep) []resolvedDep {
	type upstream struct {
		local int
		id    string
	}
	out := deps[:0]
	var at map[upstream]int
	for _, d := range deps {
		if at == nil && len(out) < 8 {
			// Most tasks have a few dependencies: compared in place.
			if k := slices.IndexFunc(out, func(o resolvedDep) bool { return o.local == d.local && o.id == d.id }); k >= 0 {
				out[k].required = out[k].required || d.required
				continue
			}
			out = append(out, d)
			continue
		}
		if at == nil {
			at = make(map[upstream]int, len(deps))
			for k, o := range out {
				at[upstream{o.local, o.id}] = k
			}
		}
		if k, ok := at[upstream{d.local, d.id}]; ok {
			out[k].required = out[k].required || d.required
			continue
		}
		at[upstream{d.local, d.id}] = len(out)
		out = append(out, d)
	}
	return out
}

// checkCycles validates the graph of the new entries together with the
// existing edges upstream of the tasks they depend on.
func (x *txn) checkCycles(entries []*entry) error {
	if !dependsOutside(entries) && acyclic(entries) {
		// The graph is the batch's own, and has no cycle: the check by
		// name would find none (it runs to name a cycle's edge).
		return nil
	}
	return x.checkCyclesByName(entries)
}

// checkCyclesByName is checkCycles over a graph of names (entries as
// "#i", existing tasks by id), naming the edge that closes a cycle.
func (x *txn) checkCyclesByName(entries []*entry) error {
	graph := make(map[string][]string, len(entries))
	nodes := make([]string, len(entries)) // each entry's node, named once
	for i := range nodes {
		nodes[i] = nodeOf(i)
	}
	var roots []string
	for _, e := range entries {
		if e.skipped() || len(e.deps) == 0 {
			continue
		}
		ups := make([]string, len(e.deps))
		for j, d := range e.deps {
			if d.local >= 0 {
				ups[j] = nodes[d.local]
			} else {
				ups[j] = d.id
				roots = append(roots, d.id)
			}
		}
		graph[nodes[e.index]] = ups
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

// dependsOutside reports whether an entry depends on an existing task.
func dependsOutside(entries []*entry) bool {
	for _, e := range entries {
		if e.skipped() {
			continue
		}
		for _, d := range e.deps {
			if d.local < 0 {
				return true
			}
		}
	}
	return false
}

// acyclic reports whether the edges between the batch's entries make no
// cycle: a depth-first search over the entries' indexes, without the
// names the cycle check's graph gives them.
func acyclic(entries []*entry) bool {
	const (
		unseen = iota
		open
		done
	)
	state := make([]uint8, len(entries))
	type frame struct{ entry, next int }
	var stack []frame
	for start := range entries {
		if state[start] != unseen {
			continue
		}
		state[start] = open
		stack = append(stack[:0], frame{entry: start})
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			deps := entries[top.entry].deps
			if entries[top.entry].skipped() || top.next >= len(deps) {
				state[top.entry] = done
				stack = stack[:len(stack)-1]
				continue
			}
			d := deps[top.next]
			top.next++
			if d.local < 0 {
				continue
			}
			switch state[d.local] {
			case open:
				return false
			case unseen:
				state[d.local] = open
				stack = append(stack, frame{entry: d.local})
			}
		}
	}
	return true
}

// qUpstreamsOf reads the edges of the tasks of a JSON array of ids, by
// downstream and upstream.
const qUpstreamsOf = `SELECT downstream, upstream FROM task_dependencies
	WHERE downstream IN (SELECT value FROM json_each(?1)) ORDER BY downstream, upstream`

// loadUpstreamClosure adds to graph every existing edge reachable upstream
// from roots, a statement per step upstream.
func (x *txn) loadUpstreamClosure(roots []string, graph map[string][]string) error {
	seen := map[string]bool{}
	frontier := roots
	for len(frontier) > 0 {
		var ask []string
		for _, id := range frontier {
			if !seen[id] {
				seen[id] = true
				ask = append(ask, id)
			}
		}
		if len(ask) == 0 {
			return nil
		}
		list, err := json.Marshal(ask)
		if err != nil {
			return err
		}
		rows, err := x.QueryContext(x.ctx, qUpstreamsOf, string(list))
		if err != nil {
			return fmt.Errorf("read upstream edges: %w", err)
		}
		var next []string
		for rows.Next() {
			var down, up string
			if err := rows.Scan(&down, &up); err != nil {
				rows.Close()
				return fmt.Errorf("read upstream edges: %w", err)
			}
			graph[down] = append(graph[down], up)
			next = append(next, up)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read upstream edges: %w", err)
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
// the new tasks as DEFINED (READY those ready at once, see evaluateNew)
// with their edges, resolving edges whose upstream (of the statuses in
// upstream) has already finished.
func (x *txn) insert(entries []*entry, upstream map[string]models.TaskStatus) error {
	var seq int64
	if err := x.QueryRowContext(x.ctx, qLastSubmission).Scan(&seq); err != nil {
		return fmt.Errorf("read the last task number: %w", err)
	}
	first := seq
	// Names first, then the rows: many rows per statement, so that a batch
	// of thousands costs tens of statements, not thousands.
	var rows []*entry
	for _, e := range entries {
		if !e.skipped() {
			rows = append(rows, e)
		}
	}
	names, err := models.UniqueTaskNames(x.s.rnd, len(rows), x.idsInUse)
	if err != nil {
		return err
	}
	for i, e := range rows {
		t := &e.task
		seq++
		t.ID, t.Status, t.CreatedAt, t.UpdatedAt, t.SubmissionSeq = names[i], models.StatusDefined, x.now, x.now, seq
		if e.ready {
			// As its promotion (evaluateNew) leaves it.
			t.Status, t.StatusReason = models.StatusReady, depsMetReason
		}
	}
	TmpPhase("names")
	if err := x.insertTaskRows(rows); err != nil {
		return err
	}
	TmpPhase("taskrows")
	if seq != first {
		if _, err := x.ExecContext(x.ctx, qSetLastSubmission, seq); err != nil {
			return fmt.Errorf("write the last task number: %w", err)
		}
	}
	// An edge to an entry of the batch is PENDING (its upstream is new and
	// DEFINED), as is one to an existing task known (from upstream) not to
	// have finished: the columns' defaults. An edge to any other task is
	// resolved against that task's state. A statement for each kind, its
	// rows in the primary key's order (downstream, upstream), so that each
	// lands beside the one before: the tasks by id, each one's upstreams
	// sorted.
	slices.SortFunc(rows, func(a, b *entry) int { return strings.Compare(a.task.ID, b.task.ID) })
	var pending, resolved []newEdge
	for _, e := range rows {
		first := len(pending)
		for _, d := range e.deps {
			switch st, ok := upstream[d.id]; {
			case d.local >= 0:
				pending = append(pending, newEdge{e.task.ID, entries[d.local].task.ID, d.required})
			case ok && st != models.StatusCompleted && st != models.StatusBlocked:
				pending = append(pending, newEdge{e.task.ID, d.id, d.required})
			default:
				resolved = append(resolved, newEdge{e.task.ID, d.id, d.required})
			}
		}
		slices.SortFunc(pending[first:], func(a, b newEdge) int { return strings.Compare(a.up, b.up) })
	}
	TmpPhase("edgeprep")
	if err := x.insertPendingEdges(pending); err != nil {
		return err
	}
	TmpPhase("edges")
	return x.insertEdges(resolved)
}

// idsInUse answers which of names are ids of tasks, or of archived tasks:
// a new task never takes an archived task's id.
func (x *txn) idsInUse(names []string) ([]string, error) {
	list, err := json.Marshal(names)
	if err != nil {
		return nil, err
	}
	used, err := queryIDs(x.ctx, x, qIDsInUse, string(list))
	if err != nil {
		return nil, fmt.Errorf("look up task ids in use: %w", err)
	}
	return used, nil
}

// taskInsertColumns are the columns a new task is inserted with, in the
// order of taskArgs.append.
const taskInsertColumns = `id, project_id, title, description, priority, status,
		verification_type, retry_count, max_retries, parent_task_id, repo_id, requires_approval, plan_source,
		is_plan_subtask, kind, metadata, created_by, not_before, expected_count, acceptance_criteria, test_commands,
		created_at, updated_at, profile, workflow_run_id, step_name, parallel_index, parallel_count, step_concurrency, rules, timeout_ns,
		agent_type, submission_seq, status_reason, runner_labels`

// taskInsertWidth is the number of columns in taskInsertColumns.
const taskInsertWidth = 35

// taskNarrowColumns are the columns most new tasks set, in the order of
// taskArgs.appendNarrow: a task whose other columns hold the defaults
// their declarations give (narrow) is inserted with these only, less than
// half the values to bind and store.
const taskNarrowColumns = `id, project_id, title, description, priority, status, verification_type,
		max_retries, kind, metadata, created_by, created_at, updated_at, submission_seq, status_reason`

// taskNarrowWidth is the number of columns in taskNarrowColumns.
const taskNarrowWidth = 15

// narrow reports whether every column of t outside taskNarrowColumns
// holds the value its declaration defaults to (0, ”, '[]' or NULL), so
// that inserting the narrow columns stores what inserting all does.
func narrow(t *models.Task) bool {
	return t.RetryCount == 0 && t.ParentTaskID == nil && t.RepoID == nil && !t.RequiresApproval && t.PlanSource == nil &&
		!t.IsPlanSubtask && t.NotBefore == nil && t.ExpectedCount == 0 && len(t.AcceptanceCriteria) == 0 &&
		len(t.TestCommands) == 0 && t.Profile == "" && t.RunID == "" && t.StepName == "" && t.ParallelIndex == 0 &&
		t.ParallelCount == 0 && t.StepConcurrency == 0 && len(t.Rules) == 0 && t.Timeout == 0 && t.AgentType == "" &&
		len(t.RunnerLabels) == 0
}

// rowsPerInsert bounds the rows of one multi-row INSERT: 100 tasks are
// 3,400 parameters, well below SQLite's limit of 32,766.
const rowsPerInsert = 100

// chunkLen is the rows of the next INSERT of tasks when n are left:
// rowsPerInsert, and the rest one by one. Only these two texts (and
// qInsertSharedTasks) are ever prepared, so the store's statement cache
// does not fill with one per tail length. (Edges go in one statement of
// one parameter each way: see insertPendingEdges.)
func chunkLen(n int) int {
	if n >= rowsPerInsert {
		return rowsPerInsert
	}
	return 1
}

// insertTaskRows inserts the named entries' tasks: narrow tasks that share
// their other columns together (insertSharedRows), the others
// rowsPerInsert per statement (see chunkLen). A chunk refused for a
// missing parent is inserted again row by row (the failed statement wrote
// nothing) to name the entry at fault.
func (x *txn) insertTaskRows(rows []*entry) error {
	if !x.allColumns {
		var err error
		if rows, err = x.insertSharedRows(rows); err != nil {
			return err
		}
	}
	args := make([]any, 0, rowsPerInsert*taskInsertWidth)
	a := newTaskArgs(x.now)
	for len(rows) > 0 {
		chunk := rows[:chunkLen(len(rows))]
		rows = rows[len(chunk):]
		err := x.insertTaskChunk(a, args[:0], chunk)
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "FOREIGN KEY") {
			return err
		}
		for i, e := range chunk {
			if err := x.insertTaskChunk(a, args[:0], chunk[i:i+1]); err != nil {
				if strings.Contains(err.Error(), "FOREIGN KEY") {
					return models.Errorf(models.CodeNotFound, "tasks[%d]: parent_task_id %q not found", e.index, e.src.ParentTaskID)
				}
				return err
			}
		}
	}
	return nil
}

// shared is what narrow tasks of a batch most often have in common: the
// values of every narrow column but the id, the title, the submission
// number, the status and its reason.
type shared struct {
	project, description, verification, kind, metadata, createdBy string
	priority, maxRetries                                          int
}

func sharedOf(t *models.Task) shared {
	return shared{project: t.ProjectID, description: t.Description, verification: string(t.VerificationType), kind: t.Kind,
		metadata: encodeMetadata(t.Metadata), createdBy: t.CreatedBy, priority: t.Priority, maxRetries: t.MaxRetries}
}

// minSharedRows is the fewest narrow rows with the same shared values that
// are inserted by qInsertSharedTasks: fewer go with the other rows, many
// per statement, so that a batch of tasks that share nothing costs no
// statement per task.
const minSharedRows = 4

// qInsertSharedTasks inserts narrow tasks that share their other columns
// (?2 to ?9, ?10 the time) from a JSON array of [id, title, submission
// number, status, status reason] rows: binding a few values per task
// instead of every column costs SQLite a third of the time, and one
// statement serves any number of tasks.
const qInsertSharedTasks = `INSERT INTO tasks (id, project_id, title, description, priority, status, verification_type,
		max_retries, kind, metadata, created_by, created_at, updated_at, submission_seq, status_reason)
	SELECT value ->> 0, ?2, value ->> 1, ?3, ?4, value ->> 3, ?5, ?6, ?7, ?8, ?9, ?10, ?10, value ->> 2, value ->> 4
	FROM json_each(?1)`

// insertSharedRows inserts, with qInsertSharedTasks, the narrow rows of
// which at least minSharedRows share their other values, and returns the
// rest, in their order, for the general insert.
func (x *txn) insertSharedRows(rows []*entry) ([]*entry, error) {
	groups := map[shared][]*entry{}
	var keys []shared // in the order of their first row
	for _, e := range rows {
		t := &e.task
		if !narrow(t) || !utf8.ValidString(t.Title) || !utf8.ValidString(t.ID) {
			continue
		}
		k := sharedOf(t)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], e)
	}
	done := map[*entry]bool{}
	now := toNanos(x.now)
	var buf []byte
	for _, k := range keys {
		g := groups[k]
		if len(g) < minSharedRows {
			continue
		}
		buf = append(buf[:0], '[')
		for i, e := range g {
			if i > 0 {
				buf = append(buf, ',')
			}
			t := &e.task
			buf = append(buf, '[')
			buf = appendJSONString(buf, t.ID)
			buf = append(buf, ',')
			buf = appendJSONString(buf, t.Title)
			buf = append(buf, ',')
			buf = strconv.AppendInt(buf, t.SubmissionSeq, 10)
			buf = append(buf, ',')
			buf = appendJSONString(buf, string(t.Status))
			buf = append(buf, ',')
			buf = appendJSONString(buf, t.StatusReason)
			buf = append(buf, ']')
			done[e] = true
		}
		buf = append(buf, ']')
		if _, err := x.ExecContext(x.ctx, qInsertSharedTasks, string(buf), k.project, k.description, int64(k.priority),
			k.verification, int64(k.maxRetries), k.kind, k.metadata, k.createdBy, now); err != nil {
			return nil, fmt.Errorf("insert tasks: %w", err)
		}
	}
	if len(done) == 0 {
		return rows, nil
	}
	rest := rows[:0:0]
	for _, e := range rows {
		if !done[e] {
			rest = append(rest, e)
		}
	}
	return rest, nil
}

// insertTaskChunk inserts the tasks of chunk in one statement, of the
// narrow columns when every task of it is narrow, else of all; args is
// the space for its values.
func (x *txn) insertTaskChunk(a *taskArgs, args []any, chunk []*entry) error {
	slim := !x.allColumns
	for _, e := range chunk {
		slim = slim && narrow(&e.task)
	}
	if slim {
		for _, e := range chunk {
			args = a.appendNarrow(args, &e.task)
		}
		return x.execRows(`INSERT INTO tasks (`+taskNarrowColumns+`) VALUES `, taskNarrowWidth, len(chunk), args)
	}
	for _, e := range chunk {
		args = a.append(args, &e.task)
	}
	return x.execRows(`INSERT INTO tasks (`+taskInsertColumns+`) VALUES `, taskInsertWidth, len(chunk), args)
}

// taskArgs converts new tasks to the values of taskInsertColumns, each as
// the driver takes it (string, int64, bool or nil), so that database/sql
// converts nothing, and boxes a value that many tasks of a batch share
// (their project, their status, an empty text) once: a batch of
// thousands of tasks binds tens of thousands of values.
type taskArgs struct {
	now   any
	boxed map[string]any
}

func newTaskArgs(now time.Time) *taskArgs {
	return &taskArgs{now: toNanos(now), boxed: map[string]any{}}
}

// text boxes s, once for each text of the batch that is short (names of
// statuses, kinds, projects, empty texts): long ones are rarely shared.
func (a *taskArgs) text(s string) any {
	if len(s) > 32 {
		return s
	}
	if v, ok := a.boxed[s]; ok {
		return v
	}
	v := any(s)
	a.boxed[s] = v
	return v
}

// orNull is a nullable text column's value.
func (a *taskArgs) orNull(s *string) any {
	if s == nil {
		return nil
	}
	return a.text(*s)
}

// appendNarrow appends t's values for taskNarrowColumns to args.
func (a *taskArgs) appendNarrow(args []any, t *models.Task) []any {
	return append(args, t.ID, a.text(t.ProjectID), t.Title, a.text(t.Description), int64(t.Priority), a.text(string(t.Status)),
		a.text(string(t.VerificationType)), int64(t.MaxRetries), a.text(t.Kind), a.text(encodeMetadata(t.Metadata)),
		a.text(t.CreatedBy), a.now, a.now, t.SubmissionSeq, a.text(t.StatusReason))
}

// append appends t's values for taskInsertColumns to args.
func (a *taskArgs) append(args []any, t *models.Task) []any {
	var notBefore, runID any
	if t.NotBefore != nil {
		notBefore = toNanos(*t.NotBefore)
	}
	if t.RunID != "" {
		runID = t.RunID
	}
	return append(args, t.ID, a.text(t.ProjectID), t.Title, a.text(t.Description), int64(t.Priority), a.text(string(t.Status)),
		a.text(string(t.VerificationType)), int64(t.RetryCount), int64(t.MaxRetries), a.orNull(t.ParentTaskID), a.orNull(t.RepoID),
		t.RequiresApproval, a.orNull(t.PlanSource), t.IsPlanSubtask, a.text(t.Kind), a.text(encodeMetadata(t.Metadata)),
		a.text(t.CreatedBy), notBefore, int64(t.ExpectedCount), a.text(encodeStrings(t.AcceptanceCriteria)),
		a.text(encodeStrings(t.TestCommands)), a.now, a.now, a.text(t.Profile), runID,
		a.text(t.StepName), int64(t.ParallelIndex), int64(t.ParallelCount), int64(t.StepConcurrency), a.text(encodeRules(t.Rules)),
		int64(t.Timeout), a.text(t.AgentType), t.SubmissionSeq, a.text(t.StatusReason),
		a.text(encodeJSONColumn(t.RunnerLabels, "[]")))
}

// newEdge is a dependency edge to insert: downstream depends on upstream.
type newEdge struct {
	down, up string
	required bool
}

// qInsertPendingEdges inserts edges with the other columns' defaults
// (PENDING, unresolved) from two JSON objects, ?1 of the edges that
// require success and ?2 of the others, each mapping a downstream to the
// array of its upstreams: one statement for any number of edges, whose
// ids SQLite reads as the objects' keys and the arrays' elements, never
// parsing a row again (rows bound one parameter at a time cost a third
// more, and an array of [downstream, upstream, required] rows, each read
// with ->>, a tenth).
const qInsertPendingEdges = `INSERT INTO task_dependencies (downstream, upstream, requires_success)
	SELECT d.key, u.value, 1 FROM json_each(?1) d, json_each(d.value) u
	UNION ALL
	SELECT d.key, u.value, 0 FROM json_each(?2) d, json_each(d.value) u`

// insertPendingEdges inserts edges with the columns' defaults (PENDING,
// unresolved), in one statement: those that require success in their
// order, then the others in theirs. The edges of one downstream are
// consecutive.
func (x *txn) insertPendingEdges(edges []newEdge) error {
	if len(edges) == 0 {
		return nil
	}
	required, optional := edgesByDownstream(edges, true), edgesByDownstream(edges, false)
	if _, err := x.ExecContext(x.ctx, qInsertPendingEdges, required, optional); err != nil {
		return fmt.Errorf("insert dependencies: %w", err)
	}
	return nil
}

// edgesByDownstream encodes the edges whose requires_success is required
// as a JSON object mapping each downstream to the array of its upstreams,
// in their order; the edges of one downstream are consecutive.
func edgesByDownstream(edges []newEdge, required bool) string {
	n := 2
	for _, e := range edges {
		n += len(e.down) + len(e.up) + 8
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	down := ""
	for _, e := range edges {
		if e.required != required {
			continue
		}
		switch {
		case down == "":
			b = appendJSONString(b, e.down)
			b = append(b, ":["...)
		case e.down != down:
			b = append(b, "],"...)
			b = appendJSONString(b, e.down)
			b = append(b, ":["...)
		default:
			b = append(b, ',')
		}
		down = e.down
		b = appendJSONString(b, e.up)
	}
	if down != "" {
		b = append(b, ']')
	}
	return string(append(b, '}'))
}

// insertEdges inserts edges to existing tasks, each resolved against its
// upstream's state (qInsertEdges), in one statement.
func (x *txn) insertEdges(edges []newEdge) error {
	if len(edges) == 0 {
		return nil
	}
	if _, err := x.ExecContext(x.ctx, qInsertEdges, edgeRows(edges), toNanos(x.now)); err != nil {
		return fmt.Errorf("insert dependencies: %w", err)
	}
	return nil
}

// edgeRows encodes edges as a JSON array of [downstream, upstream,
// requires_success] rows.
func edgeRows(edges []newEdge) string {
	n := 2
	for _, e := range edges {
		n += len(e.down) + len(e.up) + 12
	}
	rows := make([]byte, 0, n)
	rows = append(rows, '[')
	for i, e := range edges {
		if i > 0 {
			rows = append(rows, ',')
		}
		rows = append(rows, '[')
		rows = appendJSONString(rows, e.down)
		rows = append(rows, ',')
		rows = appendJSONString(rows, e.up)
		if e.required {
			rows = append(rows, ",1]"...)
		} else {
			rows = append(rows, ",0]"...)
		}
	}
	return string(append(rows, ']'))
}

// appendJSONString appends s to b as a JSON string. Task ids need no
// escaping (models.ValidTaskID); anything else is encoded in full.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// execRows runs prefix followed by n rows of width parameters each, as a
// statement the transaction keeps prepared (one text per row count).
func (x *txn) execRows(prefix string, width, n int, args []any) error {
	_, err := x.ExecContext(x.ctx, multiRowSQL(prefix, width, n), args...)
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
