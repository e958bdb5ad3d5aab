package orchestrator_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
)

var runningStatuses = []models.TaskStatus{models.StatusAssigned, models.StatusInProgress, models.StatusWaitingInput,
	models.StatusVerifying, models.StatusAwaitingApproval}

func genSnapshot(t *rapid.T) orchestrator.Snapshot {
	now := t0.Add(time.Hour)
	s := orchestrator.Snapshot{Now: now, Window: time.Hour}
	nProjects := rapid.IntRange(1, 4).Draw(t, "projects")
	projectIDs := []string{"p0", "p1", "p2", "p3", "gone"}
	for i := range nProjects {
		p := orchestrator.ProjectState{
			ID:                  projectIDs[i],
			CreditWeight:        rapid.SampledFrom([]float64{0.5, 1, 2, 3}).Draw(t, "weight"),
			MaxConcurrentAgents: rapid.IntRange(0, 4).Draw(t, "max"),
			Status:              rapid.SampledFrom([]models.ProjectStatus{models.ProjectActive, models.ProjectActive, models.ProjectActive, models.ProjectPaused, models.ProjectArchived}).Draw(t, "status"),
			TokensUsed:          int64(rapid.IntRange(0, 100).Draw(t, "tokens")),
			AgentSeconds:        float64(rapid.IntRange(0, 20).Draw(t, "usage") * 300),
			CompletedInWindow:   rapid.IntRange(0, 2).Draw(t, "completed"),
			Running:             rapid.IntRange(0, 3).Draw(t, "running"),
		}
		if rapid.Bool().Draw(t, "has budget") {
			p.BudgetLimit = ptr(int64(rapid.IntRange(0, 150).Draw(t, "budget")))
		}
		s.Projects = append(s.Projects, p)
	}
	// A step of a workflow run has one cap, drawn when it first appears.
	stepCaps := map[[2]string]int{}
	genTask := func(id string, statuses []models.TaskStatus) orchestrator.TaskInfo {
		tk := orchestrator.TaskInfo{
			ID:            id,
			ProjectID:     rapid.SampledFrom(projectIDs[:nProjects+1]).Draw(t, "project"),
			Priority:      rapid.IntRange(0, 2).Draw(t, "priority"),
			CreatedBy:     rapid.SampledFrom([]string{"u0", "u1", "u2"}).Draw(t, "creator"),
			SubmissionSeq: int64(rapid.IntRange(0, 5).Draw(t, "age")),
			Kind:          rapid.SampledFrom([]string{"k0", "k1"}).Draw(t, "kind"),
			Status:        rapid.SampledFrom(statuses).Draw(t, "status"),
			AgentType:     rapid.SampledFrom([]string{"", "", "claude", "codex", "aider"}).Draw(t, "agent type"),
		}
		if src := rapid.SampledFrom([]string{"", "s0", "s1"}).Draw(t, "src"); src != "" {
			tk.Metadata = map[string]string{"src": src}
		}
		if rapid.IntRange(0, 3).Draw(t, "not before?") == 0 {
			tk.NotBefore = ptr(now.Add(time.Duration(rapid.IntRange(-2, 2).Draw(t, "not before")) * time.Hour))
		}
		tk.ExpectedCount = rapid.IntRange(0, 20).Draw(t, "expected")
		tk.SuccessCount = rapid.IntRange(0, 10).Draw(t, "success")
		tk.FailureCount = rapid.IntRange(0, 5).Draw(t, "failure")
		// Few steps and small caps, so that caps bind often.
		if run := rapid.SampledFrom([]string{"", "w0", "w0", "w1"}).Draw(t, "run"); run != "" {
			tk.RunID, tk.StepName = run, rapid.SampledFrom([]string{"s0", "s0", "s1"}).Draw(t, "step")
			k := [2]string{tk.RunID, tk.StepName}
			c, ok := stepCaps[k]
			if !ok {
				c = rapid.SampledFrom([]int{0, 1, 1, 2, 3}).Draw(t, "step concurrency")
				stepCaps[k] = c
			}
			tk.StepConcurrency = c
		}
		return tk
	}
	readyStatuses := []models.TaskStatus{models.StatusReady, models.StatusReady, models.StatusReady, models.StatusReady, models.StatusDefined, models.StatusPaused}
	for i := range rapid.IntRange(0, 30).Draw(t, "ready") {
		s.Ready = append(s.Ready, genTask(fmt.Sprintf("t%d", i), readyStatuses))
	}
	for i := range rapid.IntRange(0, 10).Draw(t, "running tasks") {
		s.Running = append(s.Running, genTask(fmt.Sprintf("r%d", i), runningStatuses))
	}
	for i := range rapid.IntRange(0, 8).Draw(t, "agents") {
		a := orchestrator.AgentInfo{ID: fmt.Sprintf("a%d", i),
			AgentType: rapid.SampledFrom([]string{"claude", "codex", "command"}).Draw(t, "agent's type")}
		for _, p := range projectIDs[:nProjects] {
			if rapid.IntRange(0, 3).Draw(t, "restricted to") == 0 {
				a.Projects = append(a.Projects, p)
			}
		}
		s.IdleAgents = append(s.IdleAgents, a)
	}
	for range rapid.IntRange(0, 3).Draw(t, "rules") {
		r := models.Rule{
			Type:      rapid.SampledFrom([]models.RuleType{models.RuleConcurrency, models.RuleCapacity, "Concurency"}).Draw(t, "type"),
			ProjectID: rapid.SampledFrom(append([]string{"", ""}, projectIDs[:nProjects]...)).Draw(t, "rule project"),
			Matcher: models.RuleMatcher{
				Kind:   rapid.SampledFrom([]string{"", "k0", "k1"}).Draw(t, "rule kind"),
				Status: rapid.SampledFrom([]string{"", "Running", "IN_PROGRESS", "assigned|WAITING_INPUT"}).Draw(t, "rule status"),
			},
		}
		if r.Matcher.Kind == "" || rapid.Bool().Draw(t, "by src") {
			r.Matcher.Fields = []string{"src"}
		}
		if r.Type.Canonical() == models.RuleCapacity {
			r.MaxCapacity = rapid.IntRange(1, 30).Draw(t, "capacity")
		} else {
			r.MaxConcurrency = rapid.IntRange(1, 3).Draw(t, "concurrency")
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("generated an invalid rule %+v: %v", r, err)
		}
		s.Rules = append(s.Rules, r)
	}
	if rapid.IntRange(0, 5).Draw(t, "global budget?") == 0 {
		s.GlobalBudget = ptr(int64(rapid.IntRange(0, 100).Draw(t, "global budget")))
		s.GlobalTokensUsed = int64(rapid.IntRange(0, 100).Draw(t, "global used"))
	}
	return s
}

func shuffled(t *rapid.T, s orchestrator.Snapshot) orchestrator.Snapshot {
	s.Projects = rapid.Permutation(s.Projects).Draw(t, "projects order")
	s.Ready = rapid.Permutation(s.Ready).Draw(t, "ready order")
	s.Running = rapid.Permutation(s.Running).Draw(t, "running order")
	s.Rules = rapid.Permutation(s.Rules).Draw(t, "rules order")
	agents := rapid.Permutation(s.IdleAgents).Draw(t, "agents order")
	s.IdleAgents = nil
	for _, a := range agents {
		a.Projects = rapid.Permutation(a.Projects).Draw(t, "agent projects order")
		s.IdleAgents = append(s.IdleAgents, a)
	}
	return s
}

// checker is a reference model of what the scheduler may do, written
// independently of it: it judges a result rather than computing one.
type checker struct {
	s        orchestrator.Snapshot
	projects map[string]orchestrator.ProjectState
	assigned []orchestrator.TaskInfo
}

func remaining(t orchestrator.TaskInfo) int {
	return max(0, t.ExpectedCount-t.SuccessCount-t.FailureCount)
}

func ruleTask(t orchestrator.TaskInfo) models.RuleTask {
	return models.RuleTask{ProjectID: t.ProjectID, Kind: t.Kind, Metadata: t.Metadata, Status: t.Status}
}

// ruleAllows reports whether cand may run alongside the running tasks and
// every assigned task other than itself.
func (c *checker) ruleAllows(r models.Rule, cand orchestrator.TaskInfo) bool {
	if !r.AppliesTo(cand.ProjectID, cand.Kind) {
		return true
	}
	count, work := 1, remaining(cand)
	for _, o := range c.s.Running {
		if r.Matches(ruleTask(cand), ruleTask(o)) {
			count++
			work += remaining(o)
		}
	}
	for _, a := range c.assigned {
		if a.ID == cand.ID || (r.ProjectID != "" && a.ProjectID != r.ProjectID) || a.Kind != cand.Kind {
			continue
		}
		same := true
		for _, f := range r.Matcher.Fields {
			x, okx := a.Metadata[f]
			y, oky := cand.Metadata[f]
			same = same && okx == oky && x == y
		}
		if same {
			count++
			work += remaining(a)
		}
	}
	if r.Type.Canonical() == models.RuleCapacity {
		return work <= r.MaxCapacity
	}
	return count <= r.MaxConcurrency
}

// stepAllows reports whether cand keeps its step's cap alongside the
// running tasks and every assigned task other than itself of its run and
// step.
func (c *checker) stepAllows(cand orchestrator.TaskInfo) bool {
	if cand.StepConcurrency <= 0 {
		return true
	}
	count := 1
	for _, o := range c.s.Running {
		if o.RunID == cand.RunID && o.StepName == cand.StepName {
			count++
		}
	}
	for _, a := range c.assigned {
		if a.ID != cand.ID && a.RunID == cand.RunID && a.StepName == cand.StepName {
			count++
		}
	}
	return count <= cand.StepConcurrency
}

// rulesAllow reports whether cand keeps every rule and its step's cap.
func (c *checker) rulesAllow(cand orchestrator.TaskInfo) bool {
	if !c.stepAllows(cand) {
		return false
	}
	for _, r := range c.s.Rules {
		if !c.ruleAllows(r, cand) {
			return false
		}
	}
	return true
}

// eligible reports whether the task is a due READY task of a project that
// may be scheduled at all.
func (c *checker) eligible(t orchestrator.TaskInfo) bool {
	p, ok := c.projects[t.ProjectID]
	return ok && t.Status == models.StatusReady && (t.NotBefore == nil || !t.NotBefore.After(c.s.Now)) &&
		p.Status == models.ProjectActive && (p.BudgetLimit == nil || p.TokensUsed < *p.BudgetLimit) &&
		(c.s.GlobalBudget == nil || c.s.GlobalTokensUsed < *c.s.GlobalBudget)
}

// agentServes reports whether a may take tk: it works on tk's project and,
// when tk is routed to an agent type, is of that type.
func agentServes(a orchestrator.AgentInfo, tk orchestrator.TaskInfo) bool {
	return (len(a.Projects) == 0 || slices.Contains(a.Projects, tk.ProjectID)) &&
		(tk.AgentType == "" || a.AgentType == tk.AgentType)
}

func checkResult(t *rapid.T, s orchestrator.Snapshot, got []orchestrator.Assignment) {
	c := &checker{s: s, projects: map[string]orchestrator.ProjectState{}}
	for _, p := range s.Projects {
		c.projects[p.ID] = p
	}
	ready := map[string]orchestrator.TaskInfo{}
	for _, tk := range s.Ready {
		ready[tk.ID] = tk
	}
	agentsByID := map[string]orchestrator.AgentInfo{}
	for _, a := range s.IdleAgents {
		agentsByID[a.ID] = a
	}
	usedAgents, usedTasks := map[string]bool{}, map[string]bool{}
	perProject := map[string]int{}
	guaranteed := map[string]bool{}
	fairShareSeen := false
	for i, a := range got {
		tk, ok := ready[a.TaskID]
		switch {
		case !ok:
			t.Fatalf("assignment %d: task %s is not in the snapshot", i, a.TaskID)
		case usedTasks[a.TaskID]:
			t.Fatalf("task %s assigned twice", a.TaskID)
		case usedAgents[a.AgentID]:
			t.Fatalf("agent %s assigned twice", a.AgentID)
		case tk.ProjectID != a.ProjectID:
			t.Fatalf("assignment %d names project %s for a task of %s", i, a.ProjectID, tk.ProjectID)
		case !c.eligible(tk):
			t.Fatalf("task %s is not an eligible READY task: %+v", tk.ID, tk)
		}
		ag, ok := agentsByID[a.AgentID]
		if !ok || !agentServes(ag, tk) {
			t.Fatalf("agent %s (%s) may not take %s (project %s, agent type %q)", a.AgentID, ag.AgentType, tk.ID, a.ProjectID, tk.AgentType)
		}
		usedTasks[a.TaskID], usedAgents[a.AgentID] = true, true
		perProject[a.ProjectID]++
		switch {
		case strings.HasPrefix(a.Reason, orchestrator.ReasonGuarantee):
			if fairShareSeen || guaranteed[a.ProjectID] || c.projects[a.ProjectID].CompletedInWindow != 0 {
				t.Fatalf("guarantee assignment %d out of place: %v", i, got)
			}
			guaranteed[a.ProjectID] = true
		case strings.HasPrefix(a.Reason, orchestrator.ReasonFairShare):
			fairShareSeen = true
		default:
			t.Fatalf("unknown reason %q", a.Reason)
		}
		c.assigned = append(c.assigned, tk)
	}
	for id, n := range perProject {
		if p := c.projects[id]; p.Running+n > p.MaxConcurrentAgents {
			t.Fatalf("project %s: %d running + %d assigned > max %d", id, p.Running, n, p.MaxConcurrentAgents)
		}
	}
	// Step caps: for every step of a run with a cap (the generator gives
	// all of a step's tasks the same one), running + assigned ≤ cap
	// whenever running alone was ≤ cap, and nothing is assigned to a step
	// already at or over its cap.
	type step struct{ run, name string }
	caps, runningIn, assignedTo := map[step]int{}, map[step]int{}, map[step]int{}
	for _, tk := range append(slices.Clone(s.Ready), s.Running...) {
		if tk.StepConcurrency > 0 {
			caps[step{tk.RunID, tk.StepName}] = tk.StepConcurrency
		}
	}
	for _, tk := range s.Running {
		runningIn[step{tk.RunID, tk.StepName}]++
	}
	for _, tk := range c.assigned {
		assignedTo[step{tk.RunID, tk.StepName}]++
	}
	for k, limit := range caps {
		r, a := runningIn[k], assignedTo[k]
		if r <= limit && r+a > limit {
			t.Fatalf("step %s/%s: %d running + %d assigned > cap %d", k.run, k.name, r, a, limit)
		}
		if r >= limit && a > 0 {
			t.Fatalf("step %s/%s: %d assigned with %d running at cap %d", k.run, k.name, a, r, limit)
		}
	}
	for _, tk := range c.assigned {
		if !c.rulesAllow(tk) {
			t.Fatalf("assigning %s exceeds a rule or its step's cap", tk.ID)
		}
	}
	// Nothing left that could start: an idle agent and a startable task
	// that it may take must not both remain.
	for _, tk := range s.Ready {
		if usedTasks[tk.ID] || !c.eligible(tk) || !c.rulesAllow(tk) {
			continue
		}
		p := c.projects[tk.ProjectID]
		if p.Running+perProject[tk.ProjectID] >= p.MaxConcurrentAgents {
			continue
		}
		for _, a := range s.IdleAgents {
			if !usedAgents[a.ID] && agentServes(a, tk) {
				t.Fatalf("agent %s left idle while task %s could start", a.ID, tk.ID)
			}
		}
	}
	// Priority: a task still startable at the end was startable all round,
	// so no task of its project with a later priority (or, at priority 0,
	// a younger task) may have been chosen over it. A task routed to an
	// agent type was startable all round only if an agent of its type
	// that serves it is still idle at the end.
	for _, y := range s.Ready {
		if usedTasks[y.ID] || !c.eligible(y) || !c.rulesAllow(y) {
			continue
		}
		if y.AgentType != "" && !slices.ContainsFunc(s.IdleAgents, func(a orchestrator.AgentInfo) bool {
			return !usedAgents[a.ID] && agentServes(a, y)
		}) {
			continue
		}
		for _, x := range c.assigned {
			if x.ProjectID != y.ProjectID {
				continue
			}
			older := y.SubmissionSeq < x.SubmissionSeq || y.SubmissionSeq == x.SubmissionSeq && y.ID < x.ID
			if y.Priority < x.Priority || (y.Priority == 0 && x.Priority == 0 && older) {
				t.Fatalf("task %s (priority %d) chosen over %s (priority %d)", x.ID, x.Priority, y.ID, y.Priority)
			}
		}
	}
}

func TestSchedulerProperties(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		got := orchestrator.Schedule(s, orchestrator.SchedulerConfig{})
		checkResult(t, s, got)
		again := orchestrator.Schedule(shuffled(t, s), orchestrator.SchedulerConfig{})
		if !slices.Equal(got, again) {
			t.Fatalf("input order changed the result:\n%v\n%v", got, again)
		}
	})
}

// TestExclusionsAreSound: a READY task that Exclusions leaves out (the
// store does not even read it) is one the scheduler would refuse, and a
// task marked Waiting takes no slot from it.
func TestExclusionsAreSound(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		for i := range s.Running {
			// Waiting tasks count only under rules naming their status.
			s.Running[i].Waiting = (s.Running[i].Status == models.StatusAwaitingApproval ||
				s.Running[i].Status == models.StatusVerifying) && rapid.Bool().Draw(t, "waiting")
		}
		// Some READY tasks carry the drawn rules as their own; the store
		// reports each distinct set of them.
		if len(s.Rules) > 0 && rapid.Bool().Draw(t, "own rules") {
			seen := map[string]bool{}
			for i := range s.Ready {
				if !rapid.Bool().Draw(t, "carries") {
					continue
				}
				n := rapid.IntRange(1, len(s.Rules)).Draw(t, "own")
				s.Ready[i].Rules = slices.Clone(s.Rules[:n])
				b, err := json.Marshal(s.Ready[i].Rules)
				if err != nil {
					t.Fatal(err)
				}
				// As the store gives them: decoded from the stored text.
				s.Ready[i].Rules = nil
				if err := json.Unmarshal(b, &s.Ready[i].Rules); err != nil {
					t.Fatal(err)
				}
				if k := s.Ready[i].ProjectID + "\x00" + string(b); !seen[k] {
					seen[k] = true
					s.OwnRules = append(s.OwnRules, orchestrator.OwnRuleSet{ProjectID: s.Ready[i].ProjectID, Text: string(b),
						Rules: s.Ready[i].Rules})
				}
			}
			if rapid.Bool().Draw(t, "only own") {
				s.Rules = nil
			}
		}
		excl := orchestrator.Exclusions(s)
		assigned := map[string]bool{}
		for _, a := range orchestrator.Schedule(s, orchestrator.SchedulerConfig{}) {
			assigned[a.TaskID] = true
		}
		for _, ti := range s.Ready {
			tk := models.Task{ID: ti.ID, ProjectID: ti.ProjectID, Kind: ti.Kind, Metadata: ti.Metadata,
				ExpectedCount: ti.ExpectedCount, SuccessCount: ti.SuccessCount, FailureCount: ti.FailureCount,
				RunID: ti.RunID, StepName: ti.StepName, StepConcurrency: ti.StepConcurrency, Rules: ti.Rules}
			for _, e := range excl {
				if e.Matches(tk) && assigned[ti.ID] {
					t.Fatalf("task %s is assigned, yet excluded by %+v", ti.ID, e)
				}
			}
		}
	})
}
