package orchestrator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// DefaultQuantum is the agent time each assignment is assumed to add to its
// project's usage while the round that made it goes on.
const DefaultQuantum = 10 * time.Minute

// SchedulerConfig tunes [Schedule].
type SchedulerConfig struct {
	// Quantum is the agent time an assignment adds to its project's usage
	// within the round, so that shares move as agents are handed out. Zero
	// or negative means DefaultQuantum.
	Quantum time.Duration
}

// The prefixes of Assignment.Reason, one per part of the policy.
const (
	ReasonGuarantee = "minimum-task guarantee"
	ReasonFairShare = "fair share"
)

// Schedule decides which idle agent starts which READY task in this round.
// It is a pure function of the snapshot: no I/O, no clock, no map iterated
// without sorting, and the order of the snapshot's slices does not matter.
// The policy is described in the package documentation. Assignments come in
// the order they were chosen; each agent and each task appears at most once.
func Schedule(s Snapshot, cfg SchedulerConfig) []Assignment {
	if s.GlobalBudget != nil && s.GlobalTokensUsed >= *s.GlobalBudget {
		return nil
	}
	r := newRound(s, cfg)
	if len(r.projects) == 0 || len(r.agents) == 0 {
		return nil
	}
	r.guarantee()
	r.fairShare()
	return r.out
}

// candidate is a READY task of an eligible project.
type candidate struct {
	*TaskInfo
	remaining int
	// rules are the rules that apply to the task, with its group under
	// each, worked out from all on first use (most candidates are never
	// looked at in a round).
	rules    []ruleRef
	all      []*ruleState
	own      []*ruleState // the task's own rules
	resolved bool
	// step counts the running and assigned tasks of the candidate's run and
	// step; nil when no candidate of that run and step has a cap.
	step *stepGroup
	// assigned: chosen in this round. blocked: a rule or its step's cap
	// refused it in this round; both only tighten as the round goes on, so
	// it stays refused.
	assigned, blocked bool
}

func (c *candidate) gone() bool { return c.assigned || c.blocked }

// compareAge orders tasks by age: CreatedAt, then ID.
func compareAge(a, b *candidate) int {
	if d := a.CreatedAt.Compare(b.CreatedAt); d != 0 {
		return d
	}
	return strings.Compare(a.ID, b.ID)
}

func (c *candidate) olderThan(o *candidate) bool { return compareAge(c, o) < 0 }

type ruleRef struct {
	rule *ruleState
	key  string
}

// ruleState is a rule with the running totals of each group it counts.
type ruleState struct {
	rule     models.Rule
	typ      models.RuleType
	statuses []models.TaskStatus
	// invalid rules refuse every task they apply to.
	invalid bool
	// own: a task's own rule, shared by the candidates that carry it; it
	// applies to them only, and counts the tasks of its matcher's kind
	// (of each candidate's own kind when it names none).
	own    bool
	groups map[string]*ruleGroup
}

// counts reports whether rs counts task t: in its scope, of its kind, with
// a status in its set (any status when assigned says t was assigned in
// this round).
func (rs *ruleState) counts(t *TaskInfo, assigned bool) bool {
	return !rs.invalid && (rs.rule.ProjectID == "" || rs.rule.ProjectID == t.ProjectID) &&
		(rs.rule.Matcher.Kind == "" || rs.rule.Matcher.Kind == t.Kind) && (assigned || slices.Contains(rs.statuses, t.Status))
}

type ruleGroup struct{ count, work int }

// stepKey names a step of a workflow run.
type stepKey struct{ run, step string }

// stepGroup counts the running tasks of a step of a run plus those assigned
// to it in this round.
type stepGroup struct{ count int }

type project struct {
	ProjectState
	weight   float64
	assigned int
	// byAge holds the candidates oldest first; byPriority by priority, then age.
	byAge, byPriority []*candidate
	ageCursor         int
	priorityCursor    int
	// creators counts running tasks (and this round's assignments) by creator.
	creators map[string]int
	// closed: the project can take nothing more this round.
	closed bool
}

type idleAgent struct {
	AgentInfo
	used bool
}

type round struct {
	// owned are the distinct own rules of the READY tasks.
	owned    []*ruleState
	quantum  float64
	projects []*project
	agents   []*idleAgent
	out      []Assignment
}

func newRound(s Snapshot, cfg SchedulerConfig) *round {
	q := cfg.Quantum
	if q <= 0 {
		q = DefaultQuantum
	}
	r := &round{quantum: q.Seconds()}

	byID := map[string]*project{}
	for _, ps := range uniqueBy(s.Projects, func(p *ProjectState) string { return p.ID }) {
		if ps.Status != models.ProjectActive || (ps.BudgetLimit != nil && ps.TokensUsed >= *ps.BudgetLimit) ||
			ps.Running >= ps.MaxConcurrentAgents {
			continue
		}
		w := ps.CreditWeight
		if !(w > 0) || math.IsInf(w, 0) {
			w = models.DefaultCreditWeight
		}
		p := &project{ProjectState: *ps, weight: w, creators: map[string]int{}}
		r.projects = append(r.projects, p)
		byID[p.ID] = p
	}
	// uniqueBy sorted by ID, so r.projects is in ID order.

	newRule := func(rl models.Rule, own bool) *ruleState {
		rs := &ruleState{rule: rl, typ: rl.Type.Canonical(), own: own, groups: map[string]*ruleGroup{}}
		set, err := rl.Matcher.Statuses()
		rs.statuses = set
		rs.invalid = err != nil || rl.Validate() != nil
		return rs
	}
	rules := make([]*ruleState, 0, len(s.Rules))
	for _, rl := range s.Rules {
		rules = append(rules, newRule(rl, false))
	}
	ready := uniqueBy(s.Ready, func(t *TaskInfo) string { return t.ID })
	// Tasks' own rules: one state per distinct rule, shared by the
	// candidates that carry it, counting like a rule of the set.
	ownByKey := map[string]*ruleState{}
	for _, t := range ready {
		for _, rl := range t.Rules {
			k := ownRuleKey(t.ProjectID, rl)
			if ownByKey[k] == nil {
				rl.ProjectID = t.ProjectID
				ownByKey[k] = newRule(rl, true)
				r.owned = append(r.owned, ownByKey[k])
			}
		}
	}
	counting := append(slices.Clip(rules), r.owned...)
	// A step is counted only when a candidate of it has a cap to keep.
	steps := map[stepKey]*stepGroup{}
	for _, t := range ready {
		if t.StepConcurrency > 0 {
			if k := (stepKey{t.RunID, t.StepName}); steps[k] == nil {
				steps[k] = &stepGroup{}
			}
		}
	}
	for i := range s.Running {
		t := &s.Running[i]
		if g := steps[stepKey{t.RunID, t.StepName}]; g != nil {
			g.count++
		}
		if p := byID[t.ProjectID]; p != nil {
			p.creators[t.CreatedBy]++
		}
		for _, rs := range counting {
			if rs.counts(t, false) {
				rs.group(groupKey(t.Kind, t.Metadata, rs.rule.Matcher.Fields)).add(t)
			}
		}
	}

	// Sized up front: appending never moves the candidates pointed to.
	cands := make([]candidate, 0, len(ready))
	for _, t := range ready {
		p := byID[t.ProjectID]
		if p == nil || t.Status != models.StatusReady || (t.NotBefore != nil && t.NotBefore.After(s.Now)) {
			continue
		}
		c := candidate{TaskInfo: t, all: rules, step: steps[stepKey{t.RunID, t.StepName}],
			remaining: models.RemainingWork(t.ExpectedCount, t.SuccessCount, t.FailureCount)}
		for _, rl := range t.Rules {
			c.own = append(c.own, ownByKey[ownRuleKey(t.ProjectID, rl)])
		}
		cands = append(cands, c)
		p.byAge = append(p.byAge, &cands[len(cands)-1])
	}
	for _, p := range r.projects {
		slices.SortFunc(p.byAge, compareAge)
		p.byPriority = slices.Clone(p.byAge)
		slices.SortStableFunc(p.byPriority, func(a, b *candidate) int { return cmp.Compare(a.Priority, b.Priority) })
	}

	for _, a := range uniqueBy(s.IdleAgents, func(a *AgentInfo) string { return a.ID }) {
		r.agents = append(r.agents, &idleAgent{AgentInfo: *a})
	}
	return r
}

// uniqueBy returns pointers to the items, sorted by key, without any item
// whose key is shared with another: a snapshot names each entity once, and
// an entry that contradicts another cannot be trusted either way. The items
// themselves are only read.
func uniqueBy[T any](items []T, key func(*T) string) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	slices.SortStableFunc(out, func(a, b *T) int { return strings.Compare(key(a), key(b)) })
	kept := out[:0]
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && key(out[j]) == key(out[i]) {
			j++
		}
		if j == i+1 {
			kept = append(kept, out[i])
		}
		i = j
	}
	return kept
}

// groupKey encodes a task's kind and its values of fields (a missing key
// differs from an empty value) injectively.
func groupKey(kind string, meta map[string]string, fields []string) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(len(kind)))
	b.WriteByte(':')
	b.WriteString(kind)
	for _, f := range fields {
		v, ok := meta[f]
		if !ok {
			b.WriteByte('-')
			continue
		}
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

func (rs *ruleState) group(key string) *ruleGroup {
	g := rs.groups[key]
	if g == nil {
		g = &ruleGroup{}
		rs.groups[key] = g
	}
	return g
}

func (g *ruleGroup) add(t *TaskInfo) {
	g.count++
	g.work += models.RemainingWork(t.ExpectedCount, t.SuccessCount, t.FailureCount)
}

// resolve works out which rules apply to c and its group under each.
func (c *candidate) resolve() {
	if c.resolved {
		return
	}
	c.resolved = true
	for _, rs := range c.all {
		if rs.rule.AppliesTo(c.ProjectID, c.Kind) {
			c.rules = append(c.rules, ruleRef{rule: rs, key: groupKey(c.Kind, c.Metadata, rs.rule.Matcher.Fields)})
		}
	}
	for _, rs := range c.own {
		kind := rs.rule.Matcher.Kind
		if kind == "" {
			kind = c.Kind
		}
		c.rules = append(c.rules, ruleRef{rule: rs, key: groupKey(kind, c.Metadata, rs.rule.Matcher.Fields)})
	}
}

// ownRuleKey names a task's own rule, scoped to the task's project: tasks
// carrying equal rules share their state.
func ownRuleKey(projectID string, rl models.Rule) string {
	rl.ProjectID = projectID
	rl.Type = rl.Type.Canonical()
	b, _ := json.Marshal(rl)
	return string(b)
}

// allows reports whether starting c now keeps every rule that applies to it.
func (c *candidate) allows() bool {
	c.resolve()
	for _, ref := range c.rules {
		rs := ref.rule
		if rs.invalid {
			return false
		}
		g := rs.groups[ref.key]
		var count, work int
		if g != nil {
			count, work = g.count, g.work
		}
		switch rs.typ {
		case models.RuleConcurrency:
			if count+1 > rs.rule.MaxConcurrency {
				return false
			}
		case models.RuleCapacity:
			if work+c.remaining > rs.rule.MaxCapacity {
				return false
			}
		}
	}
	return true
}

// stepAllows reports whether starting c now keeps its step's cap: the
// running and assigned tasks of its run and step plus c at most
// StepConcurrency (0: no cap).
func (c *candidate) stepAllows() bool {
	return c.StepConcurrency <= 0 || c.step.count+1 <= c.StepConcurrency
}

// usable reports whether c can start now, marking it blocked when its
// step's cap or a rule refuses it.
func (c *candidate) usable() bool {
	if c.gone() {
		return false
	}
	if !c.stepAllows() || !c.allows() {
		c.blocked = true
		return false
	}
	return true
}

// oldest returns the project's oldest candidate that can start now.
func (p *project) oldest() *candidate {
	for ; p.ageCursor < len(p.byAge); p.ageCursor++ {
		if c := p.byAge[p.ageCursor]; c.usable() {
			return c
		}
	}
	return nil
}

// best returns the candidate the project starts next: the lowest priority
// value; at priority 0 the oldest; otherwise the oldest task of the creator
// with the fewest running tasks, ties going to the creator whose oldest
// task is older.
func (p *project) best() *candidate {
	var first *candidate
	for ; p.priorityCursor < len(p.byPriority); p.priorityCursor++ {
		if c := p.byPriority[p.priorityCursor]; c.usable() {
			first = c
			break
		}
	}
	if first == nil || first.Priority <= 0 {
		return first
	}
	best, seen := first, map[string]bool{first.CreatedBy: true}
	for _, c := range p.byPriority[p.priorityCursor+1:] {
		if c.Priority != first.Priority {
			break
		}
		if seen[c.CreatedBy] || !c.usable() {
			continue
		}
		seen[c.CreatedBy] = true
		// Heads come oldest first, so only a strictly smaller count wins.
		if p.creators[c.CreatedBy] < p.creators[best.CreatedBy] {
			best = c
		}
	}
	return best
}

func (p *project) open() bool { return !p.closed && p.Running+p.assigned < p.MaxConcurrentAgents }

// share is the project's agent time in the window, this round's
// assignments counted at one quantum each, per unit of credit weight.
func (p *project) share(quantum float64) float64 {
	return (p.AgentSeconds + float64(p.assigned)*quantum) / p.weight
}

func (a *idleAgent) serves(projectID string) bool {
	return !a.used && (len(a.Projects) == 0 || slices.Contains(a.Projects, projectID))
}

// agentFor returns the first idle agent, in ID order, allowed to work on p.
func (r *round) agentFor(p *project) *idleAgent {
	for _, a := range r.agents {
		if a.serves(p.ID) {
			return a
		}
	}
	return nil
}

func (r *round) assign(p *project, c *candidate, a *idleAgent, reason string) {
	c.assigned, a.used = true, true
	p.assigned++
	p.creators[c.CreatedBy]++
	if c.step != nil {
		c.step.count++
	}
	c.resolve()
	for _, ref := range c.rules {
		if !ref.rule.own {
			ref.rule.group(ref.key).add(c.TaskInfo)
		}
	}
	// Tasks' own rules count every task of their kind, whoever carries them.
	for _, rs := range r.owned {
		if rs.counts(c.TaskInfo, true) {
			rs.group(groupKey(c.Kind, c.Metadata, rs.rule.Matcher.Fields)).add(c.TaskInfo)
		}
	}
	r.out = append(r.out, Assignment{TaskID: c.ID, AgentID: a.ID, ProjectID: p.ID, Reason: reason})
}

// guarantee gives one task to every project with work and no completion in
// the window, oldest waiting work first.
func (r *round) guarantee() {
	type starved struct {
		p      *project
		oldest *candidate
	}
	var list []starved
	for _, p := range r.projects {
		if p.CompletedInWindow == 0 {
			if o := p.oldest(); o != nil {
				list = append(list, starved{p, o})
			}
		}
	}
	slices.SortFunc(list, func(a, b starved) int {
		if a.oldest.olderThan(b.oldest) {
			return -1
		}
		if b.oldest.olderThan(a.oldest) {
			return 1
		}
		return strings.Compare(a.p.ID, b.p.ID)
	})
	for _, s := range list {
		if !s.p.open() {
			continue
		}
		a := r.agentFor(s.p)
		if a == nil {
			continue
		}
		if c := s.p.best(); c != nil {
			r.assign(s.p, c, a, ReasonGuarantee+": no task completed in the window")
		}
	}
}

// fairShare hands out the remaining agents, each to the project furthest
// below its share.
func (r *round) fairShare() {
	for {
		var pick *project
		var pickShare float64
		var pickOldest *candidate
		for _, p := range r.projects {
			if !p.open() {
				p.closed = true
				continue
			}
			oldest := p.oldest()
			if oldest == nil || r.agentFor(p) == nil {
				p.closed = true
				continue
			}
			sh := p.share(r.quantum)
			if pick == nil || sh < pickShare ||
				sh == pickShare && (p.weight > pick.weight ||
					p.weight == pick.weight && oldest.olderThan(pickOldest)) {
				// Projects are visited in ID order, so a full tie keeps the first.
				pick, pickShare, pickOldest = p, sh, oldest
			}
		}
		if pick == nil {
			return
		}
		c := pick.best() // not nil: pick.oldest() found a candidate that can start
		r.assign(pick, c, r.agentFor(pick), fmt.Sprintf("%s: %.0f agent-seconds at weight %g, lowest share %.0f",
			ReasonFairShare, pick.AgentSeconds+float64(pick.assigned)*r.quantum, pick.weight, pickShare))
	}
}
