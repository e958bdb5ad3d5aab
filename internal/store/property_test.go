package store_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"pgregory.net/rapid"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/statemachine"
	"github.com/agentqueued/agentqueued/internal/store"
)

// refEdge is the reference model's view of one dependency edge.
type refEdge struct {
	up, down int
	required bool
	res      models.EdgeResolution
}

// refModel is a deliberately simple model of the dependency semantics: after
// each change it re-examines every task until nothing changes (a global
// fixpoint), where the store follows edges from the task that changed.
type refModel struct {
	status  []models.TaskStatus
	retries []int
	last    []models.TaskEvent
	cascade []bool // blocked through UPSTREAM_FAILED
	forced  []bool // made READY or COMPLETED by an admin, bypassing its edges
	edges   []*refEdge
	// collected by the latest operation
	promoted, blocked, reopened map[int]bool
}

const maxRetries = 1

func (m *refModel) addTask(deps []refEdge) int {
	i := len(m.status)
	m.status = append(m.status, models.StatusDefined)
	m.retries = append(m.retries, 0)
	m.last = append(m.last, "")
	m.cascade = append(m.cascade, false)
	m.forced = append(m.forced, false)
	for _, d := range deps {
		e := &refEdge{up: d.up, down: i, required: d.required, res: models.EdgePending}
		switch m.status[d.up] {
		case models.StatusCompleted:
			e.res = models.EdgeSatisfied
		case models.StatusBlocked:
			e.res = models.EdgeSatisfied
			if e.required {
				e.res = models.EdgeBroken
			}
		}
		m.edges = append(m.edges, e)
	}
	m.resetCollected()
	m.settle()
	return i
}

func (m *refModel) resetCollected() {
	m.promoted, m.blocked, m.reopened = map[int]bool{}, map[int]bool{}, map[int]bool{}
}

// updateEdges applies the edge rules for task i moving from -> to.
func (m *refModel) updateEdges(i int, from, to models.TaskStatus) {
	for _, e := range m.edges {
		if e.up != i {
			continue
		}
		switch {
		case to == models.StatusCompleted:
			e.res = models.EdgeSatisfied
		case to == models.StatusBlocked:
			if e.res == models.EdgePending {
				e.res = models.EdgeSatisfied
				if e.required {
					e.res = models.EdgeBroken
				}
			}
		case from == models.StatusBlocked || from == models.StatusCompleted:
			// Not running and not completed: DEFINED, or BLOCKED by the
			// cascade or on its own (a cancel, a stop, a failure).
			notStarted := m.status[e.down] == models.StatusDefined || m.status[e.down] == models.StatusBlocked
			if e.res == models.EdgeBroken || e.res == models.EdgeSatisfied && notStarted {
				e.res = models.EdgePending
			}
		}
	}
}

func (m *refModel) incoming(i int) (broken, unsatisfied int) {
	for _, e := range m.edges {
		if e.down == i {
			if e.res == models.EdgeBroken {
				broken++
			}
			if e.res != models.EdgeSatisfied {
				unsatisfied++
			}
		}
	}
	return broken, unsatisfied
}

func (m *refModel) set(i int, to models.TaskStatus, ev models.TaskEvent) {
	from := m.status[i]
	m.status[i], m.last[i] = to, ev
	m.cascade[i] = ev == models.EventUpstreamFailed
	m.updateEdges(i, from, to)
}

func (m *refModel) settle() {
	for changed := true; changed; {
		changed = false
		for i := range m.status {
			broken, unsatisfied := m.incoming(i)
			switch {
			case m.status[i] == models.StatusDefined && broken > 0:
				m.set(i, models.StatusBlocked, models.EventUpstreamFailed)
				m.blocked[i], changed = true, true
			case m.status[i] == models.StatusDefined && unsatisfied == 0:
				m.set(i, models.StatusReady, models.EventDepsMet)
				m.forced[i] = false
				m.promoted[i], changed = true, true
			case m.status[i] == models.StatusBlocked && m.cascade[i] && broken == 0:
				m.set(i, models.StatusDefined, models.EventUpstreamReopened)
				m.reopened[i], changed = true, true
			}
		}
	}
}

// outcome is what the model expects of one event.
type outcome int

const (
	applies outcome = iota
	duplicate
	refused
)

func (m *refModel) event(i int, ev models.TaskEvent) outcome {
	m.resetCollected()
	to, err := statemachine.TaskTransition(m.status[i], ev)
	if err != nil {
		if m.last[i] == ev {
			return duplicate
		}
		return refused
	}
	if ev == models.EventRetry && m.retries[i] >= maxRetries {
		return refused
	}
	switch ev {
	case models.EventRetry:
		m.retries[i]++
	case models.EventAdminRestart:
		m.retries[i] = 0
	}
	// ADMIN_RESTART makes a task READY whatever its edges (a cancelled or
	// otherwise BLOCKED task's edges may have been withdrawn meanwhile).
	if ev == models.EventAdminRestart || ev == models.EventAdminSkip && m.cascade[i] {
		m.forced[i] = true
	} else if to == models.StatusReady && m.status[i] == models.StatusBlocked {
		m.forced[i] = true
	}
	m.set(i, to, ev)
	m.settle()
	return applies
}

var propertyEvents = []models.TaskEvent{
	models.EventAssigned, models.EventAgentStarted, models.EventAgentCompleted, models.EventVerifyPassed,
	models.EventAgentFailed, models.EventRetry, models.EventMaxRetries, models.EventAdminStop,
	models.EventAdminRestart, models.EventAdminSkip, models.EventVerifyFailed, models.EventTimeout, models.EventAdminCancel,
	models.EventTimeoutFailed,
}

func TestPropertyDependencyFacts(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		s, err := store.Open(ctx, store.Config{Path: filepath.Join(t.TempDir(), fmt.Sprintf("prop-%d.db", rapid.Int().Draw(rt, "db")))})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		if _, err := s.CreateProject(ctx, models.Project{ID: "p"}); err != nil {
			rt.Fatal(err)
		}
		m := &refModel{}
		var ids []string
		index := map[string]int{}
		satisfiedBy := map[[2]string]int64{}

		addTasks := func(n int, existing int) {
			batch := models.TaskBatch{ProjectID: "p"}
			var deps [][]refEdge
			for k := 0; k < n; k++ {
				bt := models.BatchTask{LocalID: fmt.Sprintf("n%d", k), Title: "t", MaxRetries: new(int)}
				*bt.MaxRetries = maxRetries
				var rd []refEdge
				total := existing + k
				for up := 0; up < total; up++ {
					if !rapid.Bool().Draw(rt, "edge") || !rapid.Bool().Draw(rt, "edge2") {
						continue
					}
					req := rapid.IntRange(0, 3).Draw(rt, "required") > 0
					ref := ""
					if up < existing {
						ref = ids[up]
					} else {
						ref = fmt.Sprintf("n%d", up-existing)
					}
					bt.Dependencies = append(bt.Dependencies, models.BatchDependency{ID: ref, RequiresSuccess: &req})
					rd = append(rd, refEdge{up: up, required: req})
				}
				batch.Tasks = append(batch.Tasks, bt)
				deps = append(deps, rd)
			}
			res, err := s.CreateTasks(ctx, batch)
			if err != nil {
				rt.Fatalf("create: %v", err)
			}
			// The model adds the batch's tasks in order, settling after each,
			// as the store evaluates each new task in turn.
			for k, r := range res {
				i := m.addTask(deps[k])
				ids = append(ids, r.TaskID)
				index[r.TaskID] = i
				if r.Status != m.status[i] {
					rt.Fatalf("new task %s: store %s, model %s", r.TaskID, r.Status, m.status[i])
				}
			}
			compare(rt, s, m, ids, index, satisfiedBy)
		}

		addTasks(rapid.IntRange(2, 8).Draw(rt, "initial"), 0)
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		var lastTask = -1
		var lastEvent models.TaskEvent
		for step := 0; step < steps; step++ {
			kind := rapid.IntRange(0, 9).Draw(rt, "kind")
			if kind == 0 && len(ids) < 14 {
				addTasks(rapid.IntRange(1, 3).Draw(rt, "more"), len(ids))
				continue
			}
			i := rapid.IntRange(0, len(ids)-1).Draw(rt, "task")
			ev := rapid.SampledFrom(propertyEvents).Draw(rt, "event")
			if kind == 1 && lastTask >= 0 { // deliver the previous event again
				i, ev = lastTask, lastEvent
			}
			lastTask, lastEvent = i, ev
			want := m.event(i, ev)
			res, err := s.ApplyEvent(ctx, models.TransitionRequest{TaskID: ids[i], Event: ev, AgentID: "agent", Actor: "prop"})
			switch want {
			case applies:
				if err != nil || res.Duplicate {
					rt.Fatalf("step %d: %s on %s (%s): store refused: %v", step, ev, ids[i], res.From, err)
				}
				checkSet(rt, "promoted", res.Promoted, m.promoted, ids)
				checkSet(rt, "blocked", res.Blocked, m.blocked, ids)
				checkSet(rt, "reopened", res.Reopened, m.reopened, ids)
			case duplicate:
				if err != nil || !res.Duplicate {
					rt.Fatalf("step %d: repeated %s on %s: want duplicate, got %+v %v", step, ev, ids[i], res, err)
				}
			case refused:
				if models.ErrorCodeOf(err) != models.CodeConflict {
					rt.Fatalf("step %d: %s on %s: want conflict, got %+v %v", step, ev, ids[i], res, err)
				}
			}
			compare(rt, s, m, ids, index, satisfiedBy)
		}
	})
}

func checkSet(rt *rapid.T, what string, got []string, want map[int]bool, ids []string) {
	var w []string
	for i := range want {
		w = append(w, ids[i])
	}
	g := slices.Clone(got)
	sort.Strings(g)
	sort.Strings(w)
	if !slices.Equal(g, w) {
		rt.Fatalf("%s: store %v, model %v", what, g, w)
	}
}

func compare(rt *rapid.T, s *store.Store, m *refModel, ids []string, index map[string]int, satisfiedBy map[[2]string]int64) {
	ctx := context.Background()
	for i, id := range ids {
		d, err := s.GetTaskDetail(ctx, id)
		if err != nil {
			rt.Fatal(err)
		}
		if d.Task.Status != m.status[i] {
			rt.Fatalf("task %s: store %s, model %s", id, d.Task.Status, m.status[i])
		}
		if d.Task.RetryCount != m.retries[i] {
			rt.Fatalf("task %s: retry_count store %d, model %d", id, d.Task.RetryCount, m.retries[i])
		}
		allSatisfied := true
		for _, e := range d.Dependencies {
			var ref *refEdge
			for _, re := range m.edges {
				if re.down == i && re.up == index[e.Upstream] {
					ref = re
				}
			}
			if ref == nil || ref.res != e.Resolution {
				rt.Fatalf("edge %s -> %s: store %s, model %+v", id, e.Upstream, e.Resolution, ref)
			}
			key := [2]string{id, e.Upstream}
			if e.Resolution != models.EdgeSatisfied {
				allSatisfied = false
				if e.Resolution == models.EdgePending {
					delete(satisfiedBy, key) // withdrawn: the upstream runs again
				}
				continue
			}
			if prev, ok := satisfiedBy[key]; ok && (e.ResolvingEventID == nil || *e.ResolvingEventID != prev) {
				rt.Fatalf("edge %s -> %s satisfied twice", id, e.Upstream)
			}
			if e.ResolvingEventID != nil {
				satisfiedBy[key] = *e.ResolvingEventID
			}
		}
		if d.Task.Status == models.StatusReady && !m.forced[i] && !allSatisfied {
			rt.Fatalf("task %s is READY with an unsatisfied edge", id)
		}
		if d.Task.Status == models.StatusBlocked && m.cascade[i] {
			r, ok := index[d.Task.CascadeRootID]
			if !ok || m.status[r] != models.StatusBlocked || m.cascade[r] {
				rt.Fatalf("task %s is cascade-blocked with root cause %q, which is not a task blocked by its own failure",
					id, d.Task.CascadeRootID)
			}
		}
	}
}
