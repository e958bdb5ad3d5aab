package store

// The queries the daemon runs most often, named so that
// TestFrequentQueriesUseIndexes checks the plans of the very statements the
// code runs.
//
// planStable: the store keeps its statements prepared (stmtcache.go), and
// SQLite prepares a statement again at each use when its plan may depend
// on a bound value — a LIMIT ?, or a comparison SQLite weighs against an
// index's statistics or a partial index's condition — because the driver
// rebinds every parameter at each use. A hot statement whose plan is the
// same whatever the value writes such a parameter +? (the same value, not
// weighed by the planner); TestStatementsAreParsedOnce finds those that do
// not.
const (
	qEdgeCounts = `SELECT coalesce(sum(resolution = 'BROKEN'), 0), coalesce(sum(resolution != 'SATISFIED'), 0)
		FROM task_dependencies WHERE downstream = ?`
	qBrokenRoot = `SELECT t.id, t.cascade_root_id, t.status_reason FROM task_dependencies d
		JOIN tasks t ON t.id = d.upstream WHERE d.downstream = ? AND d.resolution = 'BROKEN' ORDER BY t.id LIMIT 1`
	qStatusReason = "SELECT status_reason FROM tasks WHERE id = ?"
	qLastEvent    = "SELECT event, from_status, to_status FROM task_events WHERE task_id = ? ORDER BY id DESC LIMIT 1"
	// qUpdateStatus changes a task's status; the waiting reason, which only
	// a READY task has and a round writes, is cleared. (+?: see planStable;
	// the row is found by its id.)
	qUpdateStatus = `UPDATE tasks SET status = ?, assigned_agent_id = ?, resume_after = ?,
		retry_count = ?, status_reason = ?, cascade_root_id = ?, updated_at = ?, waiting_code = '', waiting_reason = ''
		WHERE id = ? AND status = +?`
	qInsertEvent = `INSERT INTO task_events (task_id, from_status, to_status, event, reason, actor, created_at)
		VALUES (?,?,?,?,?,?,?)`
	// qSatisfyEdges and qBreakEdges decide an upstream's edges (now, event
	// id, outcome, upstream), recording how it ended and its last attempt.
	// (+?: see planStable.)
	qSatisfyEdges = `UPDATE task_dependencies SET resolution = 'SATISFIED', resolved_at = ?1,
			resolving_event_id = ?2, upstream_outcome = ?3, upstream_attempt = (SELECT max(attempt)
			FROM task_runs WHERE task_id = +?4 AND kind = 'work') WHERE upstream = +?4 AND resolution != 'SATISFIED'`
	qBreakEdges = `UPDATE task_dependencies SET
			resolution = CASE WHEN requires_success THEN 'BROKEN' ELSE 'SATISFIED' END,
			resolved_at = ?1, resolving_event_id = ?2, upstream_outcome = ?3, upstream_attempt = (SELECT max(attempt)
			FROM task_runs WHERE task_id = +?4 AND kind = 'work') WHERE upstream = +?4 AND resolution = 'PENDING'`
	qWithdrawEdges = `UPDATE task_dependencies SET resolution = 'PENDING', resolved_at = NULL,
			resolving_event_id = NULL, upstream_outcome = '', upstream_attempt = NULL
			WHERE upstream = ? AND (resolution = 'BROKEN' OR (resolution = 'SATISFIED'
			AND downstream IN (SELECT id FROM tasks WHERE status IN ('DEFINED', 'BLOCKED'))))`
	qDependentsToCheck = `SELECT t.id, t.status FROM task_dependencies d JOIN tasks t ON t.id = d.downstream
		WHERE d.upstream = +? AND (t.status = 'DEFINED' OR (t.status = 'BLOCKED' AND t.cascade_root_id != ''))
		ORDER BY t.submission_seq`
	qRepoOwner     = "SELECT project_id FROM repos WHERE id = ?"
	qProjectStatus = "SELECT status FROM projects WHERE id = ?"
	qTaskStatus    = "SELECT status FROM tasks WHERE id = ?"
	// qTaskStatuses reads the status of each task among a JSON array of
	// ids (a batch's upstreams outside it, a batch's tasks): one statement
	// for any number. Ids of no task are not answered.
	qTaskStatuses = "SELECT t.id, t.status FROM json_each(?1) j CROSS JOIN tasks t ON t.id = j.value"
	// qIDsInUse answers which ids of a JSON array a task has, or an
	// archived task kept (a new task never takes an archived task's id).
	qIDsInUse = `SELECT j.value FROM json_each(?1) j WHERE EXISTS (SELECT 1 FROM tasks WHERE id = j.value)
		OR EXISTS (SELECT 1 FROM archived_tasks WHERE id = j.value)`
	qTaskEvents = `SELECT id, task_id, from_status, to_status, event, reason, actor, created_at
		FROM task_events WHERE task_id = ? ORDER BY id`
	// qLastScheduledFirings reads the partial index of scheduled runs.
	qLastScheduledFirings = `SELECT hook_id, max(scheduled_at) FROM hook_runs INDEXED BY hook_runs_scheduled
		WHERE scheduled_at IS NOT NULL GROUP BY hook_id`
	// qLastHookRun is the start and scheduled time of a hook's last run
	// that was not skipped: its cooldown counts from there.
	qLastHookRun = `SELECT started_at, scheduled_at FROM hook_runs WHERE hook_id = ? AND status != 'skipped'
		ORDER BY started_at DESC LIMIT 1`
	// qHookRunCursor reads the position of the hook run a listing continues after.
	qHookRunCursor = "SELECT rowid, started_at FROM hook_runs WHERE id = ?"
	// qListHookRuns lists hook runs newest first, filtered by hook (?1),
	// project (?2) and status (?3) when those are not empty, at most ?4,
	// after the run at rowid ?5 and started_at ?6 when ?5 is not 0.
	qListHookRuns = "SELECT " + hookRunColumns + ` FROM hook_runs
		WHERE (?1 = '' OR hook_id = ?1) AND (?2 = '' OR project_id = ?2) AND (?3 = '' OR status = ?3)
		AND (?5 = 0 OR started_at < ?6 OR (started_at = ?6 AND rowid < ?5))
		ORDER BY started_at DESC, rowid DESC LIMIT ?4`
	// qWorkflowRunCursor reads the position of the run a listing continues after.
	qWorkflowRunCursor = "SELECT rowid, created_at FROM workflow_runs WHERE id = ?"
	// qListWorkflowRuns lists workflow runs newest first, filtered by
	// workflow (?1), project (?2) and status (?3) when those are not empty,
	// at most ?4, after the run at rowid ?5 and created_at ?6 when ?5 is not 0.
	qListWorkflowRuns = "SELECT " + wfRunColumns + ` FROM workflow_runs
		WHERE (?1 = '' OR workflow = ?1) AND (?2 = '' OR project_id = ?2) AND (?3 = '' OR status = ?3)
		AND (?5 = 0 OR created_at < ?6 OR (created_at = ?6 AND rowid < ?5))
		ORDER BY created_at DESC, rowid DESC LIMIT ?4`
	// qQuestionCursor reads the position of the question a listing of open
	// questions continues after.
	qQuestionCursor = "SELECT asked_at FROM questions WHERE id = ?"
	// qOpenQuestionsPage lists unanswered questions that have not timed
	// out, oldest first, after the question asked at ?1 with id ?2 (none:
	// ?2 = 0), at most ?3.
	qOpenQuestionsPage = `SELECT ` + questionColumns + ` FROM questions
		WHERE answer IS NULL AND timed_out_at IS NULL AND closed_at IS NULL AND (?2 = 0 OR asked_at > ?1 OR (asked_at = ?1 AND id > ?2))
		ORDER BY asked_at, id LIMIT ?3`
	// qRunStepCounts counts a workflow run's tasks by step and status.
	qRunStepCounts = `SELECT step_name, status, count(*) FROM tasks WHERE workflow_run_id = ? GROUP BY step_name, status`
	qTokensSince   = `SELECT coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), 0)
		FROM token_ledger WHERE project_id = ? AND created_at >= ?`
	// qAgentSecondsInWindow sums, per project, the part of each run inside
	// the window (open runs count up to now). Arguments: now, now, from, from.
	qAgentSecondsInWindow = `SELECT project_id, sum(min(coalesce(ended_at, ?), ?) - max(started_at, ?))
		FROM task_runs WHERE ended_at IS NULL OR ended_at >= ? GROUP BY project_id`
	qCompletedInWindow = `SELECT t.project_id, count(*) FROM task_events e JOIN tasks t ON t.id = e.task_id
		WHERE e.to_status = 'COMPLETED' AND e.created_at >= ? GROUP BY t.project_id`
	qTokensInWindow = `SELECT coalesce(sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens), 0)
		FROM token_ledger WHERE created_at >= ?`
	// qTokensPerProjectSince sums the ledger per project from a time on.
	// Left to itself SQLite reads the whole (project_id, created_at) index
	// to group without sorting; the window's range of the time index is
	// what it should read.
	qTokensPerProjectSince = `SELECT project_id, sum(input_tokens + output_tokens + cache_read_tokens + cache_write_tokens)
		FROM token_ledger INDEXED BY token_ledger_time WHERE created_at >= ? GROUP BY project_id ORDER BY project_id`
	// qInsertEdges inserts the dependency edges of a JSON array of
	// [downstream, upstream, requires_success] rows (?1; now ?2), each
	// resolved at once when its upstream has already finished: SATISFIED
	// by COMPLETED, and by BLOCKED when success is not required; BROKEN by
	// BLOCKED when it is. The outcome and attempt of an edge to a finished
	// upstream come from the upstream's latest event and work run (see
	// models.EdgeOutcomeOf). One statement for any number of edges.
	qInsertEdges = `INSERT INTO task_dependencies (downstream, upstream, requires_success,
		resolution, resolved_at, upstream_outcome, upstream_attempt) SELECT j.value ->> 0, t.id, j.value ->> 2,
		CASE WHEN t.status = 'COMPLETED' THEN 'SATISFIED'
		     WHEN t.status = 'BLOCKED' THEN CASE WHEN j.value ->> 2 THEN 'BROKEN' ELSE 'SATISFIED' END
		     ELSE 'PENDING' END,
		CASE WHEN t.status IN ('COMPLETED', 'BLOCKED') THEN ?2 END,
		CASE WHEN t.status NOT IN ('COMPLETED', 'BLOCKED') THEN ''
		     ELSE coalesce((SELECT CASE WHEN e.event = 'ADMIN_SKIP' THEN 'SKIPPED'
		                        WHEN e.event IN ('ADMIN_CANCEL', 'RUN_STOPPED') THEN 'CANCELLED'
		                        WHEN e.to_status = 'COMPLETED' THEN 'SUCCESS' ELSE 'FAILED' END
		                   FROM task_events e WHERE e.task_id = t.id ORDER BY e.id DESC LIMIT 1),
		                   CASE t.status WHEN 'COMPLETED' THEN 'SUCCESS' ELSE 'FAILED' END) END,
		CASE WHEN t.status IN ('COMPLETED', 'BLOCKED') THEN
		     (SELECT max(attempt) FROM task_runs r WHERE r.task_id = t.id AND r.kind = 'work') END
		FROM json_each(?1) j CROSS JOIN tasks t ON t.id = j.value ->> 1`
)
