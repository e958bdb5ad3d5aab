package orchestrator

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
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
	return Decide(s, cfg).Assignments
}

// Decision is what one round decided: the assignments, and why each READY
// task of the snapshot that is not assigned waits.
type Decision struct {
	Assignments []Assignment
	// Waiting holds, for every READY task of the snapshot not assigned,
	// why it waits; Projects, for every project of the snapshot, why its
	// READY tasks that the round did not look at wait (empty: the project
	// could take more, but its READY tasks ran out).
	Waiting  map[string]Why
	Projects map[string]Why
}

// Why is a waiting reason: a code (models.Waiting*) and a sentence.
type Why struct{ Code, Reason string }

// Decide is [Schedule] with the reasons of what it did not start. It is a
// pure function of the snapshot, like Schedule.
func Decide(s Snapshot, cfg SchedulerConfig) Decision {
	d := Decision{Waiting: map[string]Why{}, Projects: map[string]Why{}}
	r := newRound(s, cfg)
	if s.GlobalBudget != nil && s.GlobalTokensUsed >= *s.GlobalBudget {
		why := Why{models.WaitingBudget, fmt.Sprintf("the global token budget is exhausted (%d of %d tokens in the window)",
			s.GlobalTokensUsed, *s.GlobalBudget)}
		if s.GlobalBudgetFreesAt != nil {
			why.Reason += " until " + s.GlobalBudgetFreesAt.UTC().Format(time.RFC3339)
		}
		for _, p := range r.all {
			d.Projects[p.ID] = why
		}
		for _, c := range r.cands {
			d.Waiting[c.ID] = why
		}
		return d
	}
	if len(r.agents) > 0 {
		r.guarantee()
		r.fairShare()
	}
	d.Assignments = r.out
	for _, p := range r.all {
		d.Projects[p.ID] = r.projectWhy(p)
	}
	open := map[string]bool{}
	for _, p := range r.projects {
		open[p.ID] = true
	}
	for _, c := range r.cands {
		switch {
		case c.assigned:
		case !open[c.ProjectID]:
			if why, ok := d.Projects[c.ProjectID]; ok {
				d.Waiting[c.ID] = why
			}
		case c.why != nil:
			d.Waiting[c.ID] = *c.why
		case c.NotBefore != nil && c.NotBefore.After(s.Now):
			d.Waiting[c.ID] = Why{models.WaitingNotBefore, "not before " + c.NotBefore.UTC().Format(time.RFC3339)}
		default:
			// Not refused by anything of its own: its project could take
			// no more, or other work went first.
			if !c.usable() {
				d.Waiting[c.ID] = *c.why
				continue
			}
			d.Waiting[c.ID] = d.Projects[c.ProjectID]
		}
	}
	return d
}

// projectWhy says why p's READY tasks that did not start wait.
func (r *round) projectWhy(p *project) Why {
	switch {
	case p.Status != models.ProjectActive:
		return Why{models.WaitingProjectPaused, fmt.Sprintf("project %s is %s", p.ID, strings.ToLower(string(p.Status)))}
	case p.BudgetLimit != nil && p.TokensUsed >= *p.BudgetLimit:
		return Why{models.WaitingBudget, fmt.Sprintf("project %s has used its token budget (%d of %d tokens) until its budget_limit is raised",
			p.ID, p.TokensUsed, *p.BudgetLimit)}
	case p.Running+p.assigned >= p.MaxConcurrentAgents:
		return Why{models.WaitingSlots, fmt.Sprintf("all %d slots of project %s are busy", p.MaxConcurrentAgents, p.ID)}
	case r.agentFor(p.ID, "", nil) == nil && len(p.RunnerLabels) > 0:
		return Why{models.WaitingAgentsBusy, fmt.Sprintf("no idle agent on a runner labelled %s serves project %s",
			strings.Join(p.RunnerLabels, ", "), p.ID)}
	case r.agentFor(p.ID, "", nil) == nil:
		return Why{models.WaitingAgentsBusy, fmt.Sprintf("no idle agent serves project %s", p.ID)}
	case p.assigned > 0 || len(r.out) > 0:
		return Why{models.WaitingQueued, "waiting for its turn: the free agents went to work ahead of it"}
	}
	return Why{}
}

// candidate is a READY task of an eligible project.
type candidate struct {
	*TaskInfo
	// round is the round the candidate is in: its idle agents decide
	// whether a task routed to an agent type can start.
	round     *round
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
	// it stays refused. why says what refused it.
	assigned, blocked bool
	why               *Why
}

func (c *candidate) gone() bool { return c.assigned || c.blocked }

// compareAge orders tasks by age: the order they were submitted in
// (SubmissionSeq, the store's order of READY pages), then ID.
func compareAge(a, b *candidate) int {
	if d := cmp.Compare(a.SubmissionSeq, b.SubmissionSeq); d != 0 {
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
	// named are the statuses the matcher names itself (not through a group).
	named []models.TaskStatus
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
// this round). A task that holds no slot counts only under a rule whose
// matcher names its status itself.
func (rs *ruleState) counts(t *TaskInfo, assigned bool) bool {
	if rs.invalid || (rs.rule.ProjectID != "" && rs.rule.ProjectID != t.ProjectID) ||
		(rs.rule.Matcher.Kind != "" && rs.rule.Matcher.Kind != t.Kind) {
		return false
	}
	return assigned || (slices.Contains(rs.statuses, t.Status) && (!t.Waiting || slices.Contains(rs.named, t.Status)))
}

type ruleGroup struct {
	count, work int
	// kind and fields are those of the tasks the group counts (a nil
	// value: the key is missing).
	kind   string
	fields map[string]*string
}

// stepKey names a step of a workflow run.
type stepKey struct{ run, step string }

// stepGroup counts the running tasks of a step of a run plus those assigned
// to it in this round.
type stepGroup struct{ count int }

type project struct {
	ProjectState
	// eligible: the project may start tasks (active, within its budget,
	// with a free slot); only eligible projects are scheduled.
	eligible bool
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
	// deny holds the projects whose runner labels the agent's runner
	// lacks.
	deny map[string]bool
}

// hasLabels reports whether have holds every label of want.
func hasLabels(have, want []string) bool {
	for _, l := range want {
		if !slices.Contains(have, l) {
			return false
		}
	}
	return true
}

type round struct {
	// owned are the distinct own rules of the READY tasks.
	owned   []*ruleState
	quantum float64
	// all holds every project of the snapshot, projects the eligible ones.
	all, projects []*project
	agents        []*idleAgent
	// known are all the registered agents (Snapshot.Agents), for the
	// waiting reason of a task routed to an agent type.
	known []AgentInfo
	// labels are the runner labels of the projects that have some.
	labels map[string][]string
	// wanted counts the READY candidates routed to each agent type not
	// assigned yet: an untyped task leaves agents of those types to them
	// when it can (pickAgent).
	wanted map[string]int
	cands  []*candidate
	out    []Assignment
}

func newRound(s Snapshot, cfg SchedulerConfig) *round {
	q := cfg.Quantum
	if q <= 0 {
		q = DefaultQuantum
	}
	r := &round{quantum: q.Seconds(), known: s.Agents, wanted: map[string]int{}}

	byID := map[string]*project{}
	for _, ps := range uniqueBy(s.Projects, func(p *ProjectState) string { return p.ID }) {
		w := ps.CreditWeight
		if !(w > 0) || math.IsInf(w, 0) {
			w = models.DefaultCreditWeight
		}
		p := &project{ProjectState: *ps, weight: w, creators: map[string]int{}}
		p.eligible = ps.Status == models.ProjectActive && (ps.BudgetLimit == nil || ps.TokensUsed < *ps.BudgetLimit) &&
			ps.Running < ps.MaxConcurrentAgents
		r.all = append(r.all, p)
		if p.eligible {
			r.projects = append(r.projects, p)
			byID[p.ID] = p
		}
	}
	// uniqueBy sorted by ID, so r.projects is in ID order.

	rules, owned, ownByKey, steps := countRunning(s)
	r.owned = owned
	for i := range s.Running {
		if t := &s.Running[i]; !t.Waiting {
			if p := byID[t.ProjectID]; p != nil {
				p.creators[t.CreatedBy]++
			}
		}
	}

	ready := uniqueBy(s.Ready, func(t *TaskInfo) string { return t.ID })
	for _, t := range ready {
		if k := (stepKey{t.RunID, t.StepName}); t.StepConcurrency > 0 && steps[k] == nil {
			steps[k] = &stepGroup{}
		}
	}
	// Sized up front: appending never moves the candidates pointed to.
	cands := make([]candidate, 0, len(ready))
	for _, t := range ready {
		if t.Status != models.StatusReady {
			continue
		}
		k := stepKey{t.RunID, t.StepName}
		cand := candidate{TaskInfo: t, round: r, all: rules, step: steps[k],
			remaining: models.RemainingWork(t.ExpectedCount, t.SuccessCount, t.FailureCount)}
		for _, rl := range t.Rules {
			cand.own = append(cand.own, ownByKey[ownRuleKey(t.ProjectID, rl)])
		}
		cands = append(cands, cand)
		if t.AgentType != "" {
			r.wanted[t.AgentType]++
		}
		c := &cands[len(cands)-1]
		r.cands = append(r.cands, c)
		if p := byID[t.ProjectID]; p != nil && (t.NotBefore == nil || !t.NotBefore.After(s.Now)) {
			p.byAge = append(p.byAge, c)
		}
	}
	for _, p := range r.projects {
		slices.SortFunc(p.byAge, compareAge)
		p.byPriority = slices.Clone(p.byAge)
		slices.SortStableFunc(p.byPriority, func(a, b *candidate) int { return cmp.Compare(a.Priority, b.Priority) })
	}

	r.labels = map[string][]string{}
	for _, p := range r.all {
		if len(p.RunnerLabels) > 0 {
			r.labels[p.ID] = p.RunnerLabels
		}
	}
	for _, a := range uniqueBy(s.IdleAgents, func(a *AgentInfo) string { return a.ID }) {
		ia := &idleAgent{AgentInfo: *a}
		for id, want := range r.labels {
			if !hasLabels(a.Labels, want) {
				if ia.deny == nil {
					ia.deny = map[string]bool{}
				}
				ia.deny[id] = true
			}
		}
		r.agents = append(r.agents, ia)
	}
	return r
}

// countRunning counts the running tasks of s under each rule and each
// workflow step. A task that holds no slot (it waits for a person or a pull
// request) counts only under a rule whose matcher names its status itself,
// not through a group such as Running.
func countRunning(s Snapshot) (rules, owned []*ruleState, ownByKey map[string]*ruleState, steps map[stepKey]*stepGroup) {
	newRule := func(rl models.Rule, own bool) *ruleState {
		rs := &ruleState{rule: rl, typ: rl.Type.Canonical(), own: own, groups: map[string]*ruleGroup{}}
		set, err := rl.Matcher.Statuses()
		rs.statuses = set
		rs.named = namedStatuses(rl.Matcher.Status)
		rs.invalid = err != nil || rl.Validate() != nil
		return rs
	}
	rules = make([]*ruleState, 0, len(s.Rules))
	for _, rl := range s.Rules {
		rules = append(rules, newRule(rl, false))
	}
	// Tasks' own rules: one state per distinct rule, shared by the READY
	// tasks that carry it, counting like a rule of the set.
	ownByKey = map[string]*ruleState{}
	addOwn := func(projectID string, rl models.Rule) {
		k := ownRuleKey(projectID, rl)
		if ownByKey[k] == nil {
			rl.ProjectID = projectID
			ownByKey[k] = newRule(rl, true)
			owned = append(owned, ownByKey[k])
		}
	}
	for i := range s.Ready {
		for _, rl := range s.Ready[i].Rules {
			addOwn(s.Ready[i].ProjectID, rl)
		}
	}
	for _, set := range s.OwnRules {
		for _, rl := range set.Rules {
			addOwn(set.ProjectID, rl)
		}
	}
	slices.SortFunc(owned, func(a, b *ruleState) int {
		return strings.Compare(ownRuleKey(a.rule.ProjectID, a.rule), ownRuleKey(b.rule.ProjectID, b.rule))
	})
	counting := append(slices.Clip(rules), owned...)
	steps = map[stepKey]*stepGroup{}
	for i := range s.Running {
		t := &s.Running[i]
		if !t.Waiting && t.RunID != "" {
			k := stepKey{t.RunID, t.StepName}
			if steps[k] == nil {
				steps[k] = &stepGroup{}
			}
			steps[k].count++
		}
		for _, rs := range counting {
			if rs.counts(t, false) {
				rs.group(t.Kind, t.Metadata).add(t)
			}
		}
	}
	return rules, owned, ownByKey, steps
}

// namedStatuses returns the statuses a matcher's status text names one by
// one, leaving out those it names through a group.
func namedStatuses(text string) []models.TaskStatus {
	var out []models.TaskStatus
	for part := range strings.SplitSeq(text, "|") {
		st := models.TaskStatus(strings.ToUpper(strings.TrimSpace(part)))
		if st.Valid() {
			out = append(out, st)
		}
	}
	return out
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

// group returns the rule's group of tasks of kind with meta.
func (rs *ruleState) group(kind string, meta map[string]string) *ruleGroup {
	key := groupKey(kind, meta, rs.rule.Matcher.Fields)
	g := rs.groups[key]
	if g == nil {
		g = &ruleGroup{kind: kind, fields: map[string]*string{}}
		for _, f := range rs.rule.Matcher.Fields {
			if v, ok := meta[f]; ok {
				g.fields[f] = &v
			} else {
				g.fields[f] = nil
			}
		}
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

// refusal says why starting c now would break a rule, or is nil when it
// keeps every rule that applies to it.
func (c *candidate) refusal() *Why {
	c.resolve()
	for _, ref := range c.rules {
		rs := ref.rule
		if rs.invalid {
			return &Why{models.WaitingRule, fmt.Sprintf("rule %s is invalid and refuses the tasks it applies to", ruleName(rs.rule))}
		}
		g := rs.groups[ref.key]
		var count, work int
		if g != nil {
			count, work = g.count, g.work
		}
		switch rs.typ {
		case models.RuleConcurrency:
			if count+1 > rs.rule.MaxConcurrency {
				return &Why{models.WaitingRule, concurrencyReason(rs.rule, count)}
			}
		case models.RuleCapacity:
			if work+c.remaining > rs.rule.MaxCapacity {
				return &Why{models.WaitingRule, fmt.Sprintf("rule %s at its limit: %d of %d work running, the task has %d",
					ruleName(rs.rule), work, rs.rule.MaxCapacity, c.remaining)}
			}
		}
	}
	return nil
}

func concurrencyReason(r models.Rule, count int) string {
	return fmt.Sprintf("rule %s at its limit: %d of %d running", ruleName(r), count, r.MaxConcurrency)
}

// ruleName names a rule in a waiting reason: its id, or its type and kind.
func ruleName(r models.Rule) string {
	if r.ID != "" {
		return r.ID
	}
	name := string(r.Type.Canonical())
	if r.Matcher.Kind != "" {
		name += " " + r.Matcher.Kind
	}
	if len(r.Matcher.Fields) > 0 {
		name += " by " + strings.Join(r.Matcher.Fields, ",")
	}
	return "(" + name + ")"
}

func stepReason(runID, step string, count, limit int) string {
	return fmt.Sprintf("step %s of workflow run %s at its concurrency: %d of %d running", step, runID, count, limit)
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
	if !c.stepAllows() {
		c.blocked = true
		c.why = &Why{models.WaitingStep, stepReason(c.RunID, c.StepName, c.step.count, c.StepConcurrency)}
		return false
	}
	if why := c.refusal(); why != nil {
		c.blocked, c.why = true, why
		return false
	}
	if (c.AgentType != "" || len(c.RunnerLabels) > 0) && c.round.agentFor(c.ProjectID, c.AgentType, c.RunnerLabels) == nil {
		// Agents are only taken as the round goes on: it stays refused.
		c.blocked = true
		if len(c.RunnerLabels) == 0 {
			c.why = c.round.typeWhy(c.ProjectID, c.AgentType)
		} else {
			c.why = c.round.labelsWhy(c.ProjectID, c.AgentType, c.RunnerLabels)
		}
		return false
	}
	return true
}

// labelsWhy says why a task that needs runner labels of its own waits: no
// agent on a runner with them (and of agentType, when set) works on its
// project, or none of them is free.
func (r *round) labelsWhy(projectID, agentType string, labels []string) *Why {
	what := "agent"
	if agentType != "" {
		what = "agent of type " + agentType
	}
	want := strings.Join(labels, ", ")
	for _, a := range r.known {
		if (agentType == "" || a.AgentType == agentType) && (len(a.Projects) == 0 || slices.Contains(a.Projects, projectID)) &&
			hasLabels(a.Labels, r.labels[projectID]) && hasLabels(a.Labels, labels) {
			return &Why{models.WaitingRunnerLabels, fmt.Sprintf("every %s on a runner labelled %s that works on project %s is busy",
				what, want, projectID)}
		}
	}
	return &Why{models.WaitingRunnerLabels, fmt.Sprintf("no %s on a runner labelled %s works on project %s", what, want, projectID)}
}

// typeWhy says why a task routed to agentType waits: no agent of that type
// works on its project, or none of them is free.
func (r *round) typeWhy(projectID, agentType string) *Why {
	for _, a := range r.known {
		if a.AgentType == agentType && (len(a.Projects) == 0 || slices.Contains(a.Projects, projectID)) &&
			hasLabels(a.Labels, r.labels[projectID]) {
			return &Why{models.WaitingAgentType, fmt.Sprintf("every agent of type %s that works on project %s is busy", agentType, projectID)}
		}
	}
	return &Why{models.WaitingAgentType, fmt.Sprintf("no agent of type %s works on project %s", agentType, projectID)}
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

func (p *project) open() bool {
	return p.eligible && !p.closed && p.Running+p.assigned < p.MaxConcurrentAgents
}

// share is the project's agent time in the window, this round's
// assignments counted at one quantum each, per unit of credit weight.
func (p *project) share(quantum float64) float64 {
	return (p.AgentSeconds + float64(p.assigned)*quantum) / p.weight
}

// serves reports whether a is still idle and may take a task of projectID
// routed to agentType (empty: any type) that needs the runner labels
// labels (besides its project's).
func (a *idleAgent) serves(projectID, agentType string, labels []string) bool {
	return !a.used && (len(a.Projects) == 0 || slices.Contains(a.Projects, projectID)) &&
		(agentType == "" || a.AgentType == agentType) && !a.deny[projectID] && hasLabels(a.Labels, labels)
}

// warm reports whether a's checkout is of p's repository.
func (a *idleAgent) warm(p *project) bool { return p.RepoID != "" && a.RepoID == p.RepoID }

// agentFor returns the first idle agent, in ID order, allowed to work on
// projectID, of agentType (empty: any type) and on a runner with labels.
func (r *round) agentFor(projectID, agentType string, labels []string) *idleAgent {
	for _, a := range r.agents {
		if a.serves(projectID, agentType, labels) {
			return a
		}
	}
	return nil
}

// pickAgent returns the agent c starts on: the agent c prefers when it is
// idle and may take c; else the first idle agent of c's type that works on
// p; for an untyped task, the first that no waiting typed task needs if
// there is one. Among those, an agent whose checkout is of p's repository
// (warm) goes first.
func (r *round) pickAgent(p *project, c *candidate) *idleAgent {
	if c.PreferAgent != "" {
		for _, a := range r.agents {
			if a.ID == c.PreferAgent && a.serves(p.ID, c.AgentType, c.RunnerLabels) {
				return a
			}
		}
	}
	// Within each choice a warm agent goes first: its checkout of the
	// project's repository needs only a fetch.
	if c.AgentType == "" {
		for _, warm := range []bool{true, false} {
			for _, a := range r.agents {
				if (!warm || a.warm(p)) && a.serves(p.ID, "", c.RunnerLabels) && r.wanted[a.AgentType] == 0 {
					return a
				}
			}
		}
	}
	for _, a := range r.agents {
		if a.warm(p) && a.serves(p.ID, c.AgentType, c.RunnerLabels) {
			return a
		}
	}
	return r.agentFor(p.ID, c.AgentType, c.RunnerLabels)
}

func (r *round) assign(p *project, c *candidate, reason string) {
	a := r.pickAgent(p, c)
	if c.AgentType != "" {
		r.wanted[c.AgentType]--
	}
	c.assigned, a.used = true, true
	p.assigned++
	p.creators[c.CreatedBy]++
	if c.step != nil {
		c.step.count++
	}
	c.resolve()
	for _, ref := range c.rules {
		if !ref.rule.own {
			ref.rule.group(c.Kind, c.Metadata).add(c.TaskInfo)
		}
	}
	// Tasks' own rules count every task of their kind, whoever carries them.
	for _, rs := range r.owned {
		if rs.counts(c.TaskInfo, true) {
			rs.group(c.Kind, c.Metadata).add(c.TaskInfo)
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
		if r.agentFor(s.p.ID, "", nil) == nil {
			continue
		}
		// A candidate best returns can start: an agent of its type is idle.
		if c := s.p.best(); c != nil {
			r.assign(s.p, c, ReasonGuarantee+": no task completed in the window")
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
			if oldest == nil || r.agentFor(p.ID, "", nil) == nil {
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
		r.assign(pick, c, fmt.Sprintf("%s: %.0f agent-seconds at weight %g, lowest share %.0f",
			ReasonFairShare, pick.AgentSeconds+float64(pick.assigned)*r.quantum, pick.weight, pickShare))
	}
}

// Exclusions describes the groups of READY tasks that no round could start
// while the running tasks of s run: a rule or a workflow step at its limit.
// The store leaves them out of the READY tasks it reads and writes their
// waiting reason per group. It is sound (a task it excludes would be
// refused by [Schedule]) but may be incomplete: a group it cannot describe
// to the store (a metadata key a JSON path cannot name) is left to the
// scheduler.
func Exclusions(s Snapshot) []models.ReadyExclusion {
	rules, _, ownByKey, steps := countRunning(s)
	var out []models.ReadyExclusion
	// The tasks' own rules: a group at its limit excludes the READY tasks
	// of its kind and fields that carry exactly those rules.
	for _, set := range s.OwnRules {
		for _, rl := range set.Rules {
			rs := ownByKey[ownRuleKey(set.ProjectID, rl)]
			if rs == nil || rs.invalid || !describable(rs.rule.Matcher.Fields) {
				continue
			}
			r := rs.rule
			for _, k := range slices.Sorted(maps.Keys(rs.groups)) {
				g := rs.groups[k]
				switch rs.typ {
				case models.RuleConcurrency:
					if g.count >= r.MaxConcurrency {
						out = append(out, models.ReadyExclusion{ProjectID: set.ProjectID, Rules: set.Text, Kind: g.kind,
							Fields: g.fields, Code: models.WaitingRule, Reason: concurrencyReason(r, g.count)})
					}
				case models.RuleCapacity:
					left := r.MaxCapacity - g.work
					out = append(out, models.ReadyExclusion{ProjectID: set.ProjectID, Rules: set.Text, Kind: g.kind,
						Fields: g.fields, MaxRemaining: &left, Code: models.WaitingRule,
						Reason: fmt.Sprintf("rule %s at its limit: %d of %d work running, more than %d left for this task",
							ruleName(r), g.work, r.MaxCapacity, max(left, 0))})
				}
			}
		}
	}
	for _, rs := range rules {
		r := rs.rule
		if rs.invalid {
			out = append(out, models.ReadyExclusion{ProjectID: r.ProjectID, Kind: r.Matcher.Kind, Code: models.WaitingRule,
				Reason: fmt.Sprintf("rule %s is invalid and refuses the tasks it applies to", ruleName(r))})
			continue
		}
		if !describable(r.Matcher.Fields) {
			continue
		}
		keys := slices.Sorted(maps.Keys(rs.groups))
		switch rs.typ {
		case models.RuleConcurrency:
			if r.MaxConcurrency < 1 {
				out = append(out, models.ReadyExclusion{ProjectID: r.ProjectID, Kind: r.Matcher.Kind, Code: models.WaitingRule,
					Reason: concurrencyReason(r, 0)})
				continue
			}
			for _, k := range keys {
				if g := rs.groups[k]; g.count >= r.MaxConcurrency {
					out = append(out, models.ReadyExclusion{ProjectID: r.ProjectID, Kind: g.kind, Fields: g.fields,
						Code: models.WaitingRule, Reason: concurrencyReason(r, g.count)})
				}
			}
		case models.RuleCapacity:
			for _, k := range keys {
				g := rs.groups[k]
				left := r.MaxCapacity - g.work
				out = append(out, models.ReadyExclusion{ProjectID: r.ProjectID, Kind: g.kind, Fields: g.fields, MaxRemaining: &left,
					Code: models.WaitingRule, Reason: fmt.Sprintf("rule %s at its limit: %d of %d work running, more than %d left for this task",
						ruleName(r), g.work, r.MaxCapacity, max(left, 0))})
			}
			limit := r.MaxCapacity
			out = append(out, models.ReadyExclusion{ProjectID: r.ProjectID, Kind: r.Matcher.Kind, MaxRemaining: &limit,
				Code: models.WaitingRule, Reason: fmt.Sprintf("rule %s: the task's work is more than its capacity of %d",
					ruleName(r), r.MaxCapacity)})
		}
	}
	keys := slices.SortedFunc(maps.Keys(steps), func(a, b stepKey) int {
		return cmp.Or(strings.Compare(a.run, b.run), strings.Compare(a.step, b.step))
	})
	for _, k := range keys {
		n := steps[k].count
		out = append(out, models.ReadyExclusion{RunID: k.run, Step: k.step, StepRunning: n, Code: models.WaitingStep,
			Reason: fmt.Sprintf("step %s of workflow run %s at its concurrency: %d running", k.step, k.run, n)})
	}
	return out
}

// describable reports whether each metadata key can be named in a JSON
// path for the store.
func describable(fields []string) bool {
	for _, f := range fields {
		if strings.ContainsAny(f, "\"\\") {
			return false
		}
	}
	return true
}
