package orchestrator_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/orchestrator"
)

var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// proj returns an active project with room for ten agents that completed
// work in the window (so the minimum-task guarantee does not apply).
func proj(id string, mut ...func(*orchestrator.ProjectState)) orchestrator.ProjectState {
	p := orchestrator.ProjectState{ID: id, CreditWeight: 1, MaxConcurrentAgents: 10, Status: models.ProjectActive, CompletedInWindow: 1}
	for _, m := range mut {
		m(&p)
	}
	return p
}

// task returns a READY task of priority 100 submitted age-th (ages order
// tasks as their submission does).
func task(id, projectID string, age int, mut ...func(*orchestrator.TaskInfo)) orchestrator.TaskInfo {
	t := orchestrator.TaskInfo{ID: id, ProjectID: projectID, Priority: 100, CreatedBy: "alice",
		SubmissionSeq: int64(age), Status: models.StatusReady}
	for _, m := range mut {
		m(&t)
	}
	return t
}

func running(id, projectID string, mut ...func(*orchestrator.TaskInfo)) orchestrator.TaskInfo {
	return task(id, projectID, 0, append([]func(*orchestrator.TaskInfo){func(t *orchestrator.TaskInfo) { t.Status = models.StatusInProgress }}, mut...)...)
}

func kindMeta(kind string, kv ...string) func(*orchestrator.TaskInfo) {
	return func(t *orchestrator.TaskInfo) {
		t.Kind = kind
		t.Metadata = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			t.Metadata[kv[i]] = kv[i+1]
		}
	}
}

func agents(n int) []orchestrator.AgentInfo {
	out := make([]orchestrator.AgentInfo, n)
	for i := range out {
		out[i] = orchestrator.AgentInfo{ID: fmt.Sprintf("agent-%02d", i)}
	}
	return out
}

// tasksFor returns n READY tasks of projectID named projectID-0, -1, …,
// created one minute apart from age on.
func tasksFor(projectID string, n, age int, mut ...func(*orchestrator.TaskInfo)) []orchestrator.TaskInfo {
	out := make([]orchestrator.TaskInfo, n)
	for i := range out {
		out[i] = task(fmt.Sprintf("%s-%d", projectID, i), projectID, age+i, mut...)
	}
	return out
}

func schedule(t testing.TB, s orchestrator.Snapshot) []orchestrator.Assignment {
	t.Helper()
	if s.Now.IsZero() {
		s.Now = t0.Add(24 * time.Hour)
	}
	return orchestrator.Schedule(s, orchestrator.SchedulerConfig{})
}

func taskIDs(as []orchestrator.Assignment) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.TaskID
	}
	return out
}

func perProject(as []orchestrator.Assignment) map[string]int {
	out := map[string]int{}
	for _, a := range as {
		out[a.ProjectID]++
	}
	return out
}

func TestFairShareWithinOneRound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		usageA    float64
		usageB    float64
		bOlder    bool
		agents    int
		wantA     int
		wantB     int
		wantFirst string
	}{
		{"no usage", 0, 0, false, 5, 4, 1, "a"},
		{"no usage, lighter project's work older", 0, 0, true, 5, 4, 1, "a"},
		{"usage in proportion to weights", 3000, 1000, true, 5, 4, 1, "a"},
		{"heavier project far below its share", 0, 6000, false, 5, 5, 0, "a"},
		{"heavier project far above its share", 6600, 0, false, 5, 1, 4, "b"},
		{"eight agents", 0, 0, false, 8, 6, 2, "a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ageB := 10
			if tc.bOlder {
				ageB = -10
			}
			s := orchestrator.Snapshot{
				Projects: []orchestrator.ProjectState{
					proj("a", func(p *orchestrator.ProjectState) { p.CreditWeight = 3; p.AgentSeconds = tc.usageA }),
					proj("b", func(p *orchestrator.ProjectState) { p.AgentSeconds = tc.usageB }),
				},
				Ready:      append(tasksFor("a", 10, 0), tasksFor("b", 10, ageB)...),
				IdleAgents: agents(tc.agents),
			}
			got := schedule(t, s)
			counts := perProject(got)
			if counts["a"] != tc.wantA || counts["b"] != tc.wantB {
				t.Fatalf("split a:b = %d:%d, want %d:%d (%v)", counts["a"], counts["b"], tc.wantA, tc.wantB, got)
			}
			if got[0].ProjectID != tc.wantFirst {
				t.Fatalf("first assignment went to %s, want %s", got[0].ProjectID, tc.wantFirst)
			}
			for _, a := range got {
				if !strings.HasPrefix(a.Reason, orchestrator.ReasonFairShare) {
					t.Fatalf("reason %q, want fair share", a.Reason)
				}
			}
		})
	}
}

// TestFairShareOverManyRounds runs the scheduler for 2,000 rounds against a
// simulated daemon: twelve agents, each task holding its agent for three
// rounds, so four agents come free every round; agent time is charged to
// the project in a rolling window of 24 rounds.
func TestFairShareOverManyRounds(t *testing.T) {
	t.Parallel()
	const (
		rounds      = 2000
		roundLength = 200 * time.Second
		taskRounds  = 3
		windowLen   = 24
		nAgents     = 12
	)
	type run struct {
		project, agent string
		until          int
	}
	weights := map[string]float64{"heavy": 3, "light": 1}
	ids := []string{"heavy", "light"}
	var active []run
	// Stagger the start: two thirds of the agents are busy with outside
	// work finishing in rounds 1 and 2.
	for i := range nAgents {
		if i >= nAgents/taskRounds {
			active = append(active, run{agent: fmt.Sprintf("agent-%02d", i), until: i / (nAgents / taskRounds)})
		}
	}
	usage := map[string][]float64{"heavy": make([]float64, rounds), "light": make([]float64, rounds)}
	done := map[string][]int{"heavy": make([]int, rounds), "light": make([]int, rounds)}
	total := map[string]float64{}
	seq := 0
	cfg := orchestrator.SchedulerConfig{Quantum: taskRounds * roundLength}
	for r := range rounds {
		// Finish the runs that end now and free their agents.
		busy := map[string]bool{}
		var still []run
		runningCount := map[string]int{}
		for _, x := range active {
			if x.until <= r {
				if x.project != "" {
					done[x.project][r]++
				}
				continue
			}
			still = append(still, x)
			busy[x.agent] = true
			if x.project != "" {
				runningCount[x.project]++
			}
		}
		active = still
		s := orchestrator.Snapshot{Now: t0.Add(time.Duration(r) * roundLength), Window: windowLen * roundLength}
		for _, id := range ids {
			var secs float64
			completed := 0
			for w := max(0, r-windowLen); w < r; w++ {
				secs += usage[id][w]
				completed += done[id][w]
			}
			s.Projects = append(s.Projects, orchestrator.ProjectState{ID: id, CreditWeight: weights[id], MaxConcurrentAgents: nAgents,
				Status: models.ProjectActive, AgentSeconds: secs, CompletedInWindow: completed, Running: runningCount[id]})
			for range 8 {
				seq++
				s.Ready = append(s.Ready, task(fmt.Sprintf("%s-%d", id, seq), id, seq))
			}
		}
		for i := range nAgents {
			if id := fmt.Sprintf("agent-%02d", i); !busy[id] {
				s.IdleAgents = append(s.IdleAgents, orchestrator.AgentInfo{ID: id})
			}
		}
		if r > taskRounds && len(s.IdleAgents) != nAgents/taskRounds {
			t.Fatalf("round %d: %d idle agents, want %d", r, len(s.IdleAgents), nAgents/taskRounds)
		}
		got := orchestrator.Schedule(s, cfg)
		if len(got) != len(s.IdleAgents) {
			t.Fatalf("round %d: %d assignments for %d idle agents", r, len(got), len(s.IdleAgents))
		}
		for _, a := range got {
			active = append(active, run{project: a.ProjectID, agent: a.AgentID, until: r + taskRounds})
		}
		// Charge this round's agent time.
		for _, x := range active {
			if x.project != "" {
				usage[x.project][r] += roundLength.Seconds()
				total[x.project] += roundLength.Seconds()
			}
		}
	}
	heavy := total["heavy"] / (total["heavy"] + total["light"])
	t.Logf("agent-time share over %d rounds: heavy %.4f, light %.4f", rounds, heavy, 1-heavy)
	if math.Abs(heavy-0.75)/0.75 > 0.05 || math.Abs((1-heavy)-0.25)/0.25 > 0.05 {
		t.Fatalf("heavy project got %.4f of agent time, want 0.75 within 5%%", heavy)
	}
}

func TestMinimumTaskGuarantee(t *testing.T) {
	t.Parallel()
	starved := func(p *orchestrator.ProjectState) { p.CompletedInWindow = 0 }
	tests := []struct {
		name     string
		projects []orchestrator.ProjectState
		ready    []orchestrator.TaskInfo
		agents   []orchestrator.AgentInfo
		want     []string // project of each assignment, in order
		reasons  []string
	}{
		{
			name: "starved project first despite a large share",
			projects: []orchestrator.ProjectState{
				proj("big", starved, func(p *orchestrator.ProjectState) { p.AgentSeconds = 1e6 }),
				proj("small"),
			},
			ready:   append(tasksFor("big", 3, 5), tasksFor("small", 3, 0)...),
			agents:  agents(3),
			want:    []string{"big", "small", "small"},
			reasons: []string{orchestrator.ReasonGuarantee, orchestrator.ReasonFairShare, orchestrator.ReasonFairShare},
		},
		{
			name: "one task only, then fair share",
			projects: []orchestrator.ProjectState{
				proj("big", starved),
				proj("small", func(p *orchestrator.ProjectState) { p.AgentSeconds = 1e6 }),
			},
			ready:   append(tasksFor("big", 3, 5), tasksFor("small", 3, 0)...),
			agents:  agents(3),
			want:    []string{"big", "big", "big"},
			reasons: []string{orchestrator.ReasonGuarantee, orchestrator.ReasonFairShare, orchestrator.ReasonFairShare},
		},
		{
			name: "starved projects by their oldest work",
			projects: []orchestrator.ProjectState{
				proj("a", starved), proj("b", starved), proj("c"),
			},
			ready:   append(append(tasksFor("a", 2, 10), tasksFor("b", 2, 5)...), tasksFor("c", 2, 0)...),
			agents:  agents(2),
			want:    []string{"b", "a"},
			reasons: []string{orchestrator.ReasonGuarantee, orchestrator.ReasonGuarantee},
		},
		{
			name:     "no agent may work on the starved project",
			projects: []orchestrator.ProjectState{proj("a", starved), proj("b")},
			ready:    append(tasksFor("a", 2, 0), tasksFor("b", 2, 5)...),
			agents:   []orchestrator.AgentInfo{{ID: "x", Projects: []string{"b"}}},
			want:     []string{"b"},
			reasons:  []string{orchestrator.ReasonFairShare},
		},
		{
			name:     "starved project without ready work",
			projects: []orchestrator.ProjectState{proj("a", starved), proj("b")},
			ready:    tasksFor("b", 2, 5),
			agents:   agents(1),
			want:     []string{"b"},
			reasons:  []string{orchestrator.ReasonFairShare},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := schedule(t, orchestrator.Snapshot{Projects: tc.projects, Ready: tc.ready, IdleAgents: tc.agents})
			var projects []string
			for i, a := range got {
				projects = append(projects, a.ProjectID)
				if i < len(tc.reasons) && !strings.HasPrefix(a.Reason, tc.reasons[i]) {
					t.Errorf("assignment %d reason %q, want %q", i, a.Reason, tc.reasons[i])
				}
			}
			if !slices.Equal(projects, tc.want) {
				t.Fatalf("projects %v, want %v", projects, tc.want)
			}
		})
	}
}

func TestProjectEligibility(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		a            func(*orchestrator.ProjectState)
		global       *int64
		globalUsed   int64
		agents       int
		wantA, wantB int
	}{
		{"eligible", func(*orchestrator.ProjectState) {}, nil, 0, 4, 2, 2},
		{"budget reached", func(p *orchestrator.ProjectState) { p.BudgetLimit = ptr[int64](1000); p.TokensUsed = 1000 }, nil, 0, 4, 0, 4},
		{"budget exceeded", func(p *orchestrator.ProjectState) { p.BudgetLimit = ptr[int64](1000); p.TokensUsed = 5000 }, nil, 0, 4, 0, 4},
		{"budget left", func(p *orchestrator.ProjectState) { p.BudgetLimit = ptr[int64](1000); p.TokensUsed = 999 }, nil, 0, 4, 2, 2},
		{"global budget exhausted", func(*orchestrator.ProjectState) {}, ptr[int64](100), 100, 4, 0, 0},
		{"global budget left", func(*orchestrator.ProjectState) {}, ptr[int64](100), 99, 4, 2, 2},
		{"paused", func(p *orchestrator.ProjectState) { p.Status = models.ProjectPaused }, nil, 0, 4, 0, 4},
		{"archived", func(p *orchestrator.ProjectState) { p.Status = models.ProjectArchived }, nil, 0, 4, 0, 4},
		{"max agents counts this round", func(p *orchestrator.ProjectState) { p.MaxConcurrentAgents = 1 }, nil, 0, 4, 1, 3},
		{"max agents counts running", func(p *orchestrator.ProjectState) { p.MaxConcurrentAgents = 3; p.Running = 2 }, nil, 0, 4, 1, 3},
		{"max agents reached", func(p *orchestrator.ProjectState) { p.MaxConcurrentAgents = 2; p.Running = 2 }, nil, 0, 4, 0, 4},
		{"agents left idle rather than exceed limits", func(p *orchestrator.ProjectState) { p.MaxConcurrentAgents = 1 }, nil, 0, 12, 1, 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := schedule(t, orchestrator.Snapshot{
				Projects:         []orchestrator.ProjectState{proj("a", tc.a), proj("b")},
				Ready:            append(tasksFor("a", 20, 0), tasksFor("b", 20, 0)...),
				IdleAgents:       agents(tc.agents),
				GlobalBudget:     tc.global,
				GlobalTokensUsed: tc.globalUsed,
			})
			counts := perProject(got)
			if counts["a"] != tc.wantA || counts["b"] != tc.wantB {
				t.Fatalf("a:b = %d:%d, want %d:%d", counts["a"], counts["b"], tc.wantA, tc.wantB)
			}
		})
	}
}

func decodeRule(t *testing.T, s string) models.Rule {
	t.Helper()
	var r models.Rule
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	if err := r.Validate(); err != nil {
		t.Fatalf("validate %s: %v", s, err)
	}
	return r
}

func TestRules(t *testing.T) {
	t.Parallel()
	ingest := func(src string) func(*orchestrator.TaskInfo) { return kindMeta("ingest", "source", src) }
	work := func(expected, success, failure int) func(*orchestrator.TaskInfo) {
		return func(t *orchestrator.TaskInfo) {
			t.ExpectedCount, t.SuccessCount, t.FailureCount = expected, success, failure
		}
	}
	tests := []struct {
		name    string
		rules   []string
		running []orchestrator.TaskInfo
		ready   []orchestrator.TaskInfo
		want    []string // assigned task ids, sorted
	}{
		{
			name:    "concurrency per field value",
			rules:   []string{`{"type": "Concurrency", "matcher": {"kind": "ingest", "status": "Running", "fields": ["source"]}, "max_concurrency": 2}`},
			running: []orchestrator.TaskInfo{running("r1", "a", ingest("s3"))},
			ready: []orchestrator.TaskInfo{
				task("s3-1", "a", 1, ingest("s3")), task("s3-2", "a", 2, ingest("s3")), task("s3-3", "a", 3, ingest("s3")),
				task("gcs-1", "a", 4, ingest("gcs")), task("gcs-2", "a", 5, ingest("gcs")), task("gcs-3", "a", 6, ingest("gcs")),
				task("none-1", "a", 7, kindMeta("ingest")), task("none-2", "a", 8, kindMeta("ingest")), task("none-3", "a", 9, kindMeta("ingest")),
				task("other", "a", 10, kindMeta("build", "source", "s3")),
			},
			want: []string{"gcs-1", "gcs-2", "none-1", "none-2", "other", "s3-1"},
		},
		{
			name:    "status set narrower than running",
			rules:   []string{`{"type": "Concurrency", "matcher": {"kind": "ingest", "status": "IN_PROGRESS", "fields": ["source"]}, "max_concurrency": 2}`},
			running: []orchestrator.TaskInfo{running("r1", "a", ingest("s3")), running("r2", "a", ingest("s3"), func(t *orchestrator.TaskInfo) { t.Status = models.StatusWaitingInput })},
			ready:   []orchestrator.TaskInfo{task("s3-1", "a", 1, ingest("s3")), task("s3-2", "a", 2, ingest("s3"))},
			want:    []string{"s3-1"},
		},
		{
			name:    "status group counts every running status",
			rules:   []string{`{"type": "Concurrency", "matcher": {"kind": "ingest", "status": "Running", "fields": ["source"]}, "max_concurrency": 2}`},
			running: []orchestrator.TaskInfo{running("r1", "a", ingest("s3")), running("r2", "a", ingest("s3"), func(t *orchestrator.TaskInfo) { t.Status = models.StatusWaitingInput })},
			ready:   []orchestrator.TaskInfo{task("s3-1", "a", 1, ingest("s3")), task("s3-2", "a", 2, ingest("s3"))},
			want:    nil,
		},
		{
			name:  "default status set",
			rules: []string{`{"type": "Concurrency", "matcher": {"kind": "ingest"}, "max_concurrency": 3}`},
			running: []orchestrator.TaskInfo{running("r1", "a", ingest("s3")),
				running("r2", "b", ingest("x"), func(t *orchestrator.TaskInfo) { t.Status = models.StatusAwaitingApproval })},
			ready: []orchestrator.TaskInfo{task("s3-1", "a", 1, ingest("s3")), task("s3-2", "a", 2, ingest("gcs")), task("b-1", "b", 3, ingest("x"))},
			want:  []string{"s3-1"},
		},
		{
			name:    "fields without kind group each kind apart",
			rules:   []string{`{"type": "Concurrency", "matcher": {"fields": ["source"]}, "max_concurrency": 1}`},
			running: []orchestrator.TaskInfo{running("r1", "a", ingest("s3"))},
			ready:   []orchestrator.TaskInfo{task("i-1", "a", 1, ingest("s3")), task("e-1", "a", 2, kindMeta("export", "source", "s3")), task("e-2", "a", 3, kindMeta("export", "source", "s3"))},
			want:    []string{"e-1"},
		},
		{
			name:    "capacity counts remaining expected work",
			rules:   []string{`{"type": "Capacity", "matcher": {"kind": "ingest", "status": "Running"}, "max_capacity": 100}`},
			running: []orchestrator.TaskInfo{running("r1", "a", ingest("s3"), work(100, 30, 20))},
			ready: []orchestrator.TaskInfo{
				task("c40", "a", 1, ingest("s3"), work(40, 0, 0)),
				task("c20", "a", 2, ingest("s3"), work(25, 3, 2)),
				task("c10", "a", 3, ingest("s3"), work(10, 0, 0)),
				task("c0", "a", 4, ingest("s3"), work(5, 5, 1)),
			},
			want: []string{"c0", "c10", "c40"},
		},
		{
			name:  "capacity too small for one task",
			rules: []string{`{"type": "Capacity", "matcher": {"kind": "ingest"}, "max_capacity": 10}`},
			ready: []orchestrator.TaskInfo{task("c11", "a", 1, ingest("s3"), work(11, 0, 0)), task("c10", "a", 2, ingest("s3"), work(10, 0, 0))},
			want:  []string{"c10"},
		},
		{
			name:    "project rule counts and limits its project only",
			rules:   []string{`{"type": "Concurrency", "project_id": "a", "matcher": {"kind": "ingest"}, "max_concurrency": 1}`},
			running: []orchestrator.TaskInfo{running("r1", "b", ingest("s3"))},
			ready: []orchestrator.TaskInfo{
				task("a-1", "a", 1, ingest("s3")), task("a-2", "a", 2, ingest("s3")),
				task("b-1", "b", 3, ingest("s3")), task("b-2", "b", 4, ingest("s3")),
			},
			want: []string{"a-1", "b-1", "b-2"},
		},
		{
			name:    "global rule counts every project",
			rules:   []string{`{"type": "Concurrency", "matcher": {"kind": "ingest"}, "max_concurrency": 2}`},
			running: []orchestrator.TaskInfo{running("r1", "b", ingest("s3"))},
			ready: []orchestrator.TaskInfo{
				task("a-1", "a", 1, ingest("s3")), task("a-2", "a", 2, ingest("s3")),
				task("b-1", "b", 3, ingest("s3")), task("b-2", "b", 4, ingest("s3")),
			},
			want: []string{"a-1"},
		},
		{
			name:  "misspelt alias",
			rules: []string{`{"type": "Concurency", "matcher": {"kind": "ingest"}, "max_concurency": 1}`},
			ready: []orchestrator.TaskInfo{task("a-1", "a", 1, ingest("s3")), task("a-2", "a", 2, ingest("s3")), task("a-3", "a", 3, kindMeta("build"))},
			want:  []string{"a-1", "a-3"},
		},
		{
			name: "every rule must allow",
			rules: []string{
				`{"type": "Concurrency", "matcher": {"kind": "ingest"}, "max_concurrency": 5}`,
				`{"type": "Capacity", "matcher": {"kind": "ingest", "fields": ["source"]}, "max_capacity": 10}`,
			},
			ready: []orchestrator.TaskInfo{
				task("s3-1", "a", 1, ingest("s3"), work(6, 0, 0)), task("s3-2", "a", 2, ingest("s3"), work(6, 0, 0)),
				task("gcs-1", "a", 3, ingest("gcs"), work(6, 0, 0)), task("gcs-2", "a", 4, ingest("gcs"), work(4, 0, 0)),
			},
			want: []string{"gcs-1", "gcs-2", "s3-1"},
		},
		{
			name:    "a blocked urgent task does not hold back the rest",
			rules:   []string{`{"type": "Concurrency", "matcher": {"kind": "ingest"}, "max_concurrency": 1}`},
			running: []orchestrator.TaskInfo{running("r1", "a", ingest("s3"))},
			ready: []orchestrator.TaskInfo{
				task("urgent", "a", 1, ingest("s3"), func(t *orchestrator.TaskInfo) { t.Priority = 0 }),
				task("later", "a", 2, kindMeta("build")),
			},
			want: []string{"later"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var rules []models.Rule
			for _, r := range tc.rules {
				rules = append(rules, decodeRule(t, r))
			}
			got := taskIDs(schedule(t, orchestrator.Snapshot{
				Projects:   []orchestrator.ProjectState{proj("a"), proj("b")},
				Ready:      tc.ready,
				Running:    tc.running,
				IdleAgents: agents(20),
				Rules:      rules,
			}))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("assigned %v, want %v", got, tc.want)
			}
		})
	}
}

func TestInvalidRuleRefusesWhatItApplies(t *testing.T) {
	t.Parallel()
	got := taskIDs(schedule(t, orchestrator.Snapshot{
		Projects:   []orchestrator.ProjectState{proj("a")},
		Ready:      []orchestrator.TaskInfo{task("k-1", "a", 1, kindMeta("k")), task("j-1", "a", 2, kindMeta("j"))},
		IdleAgents: agents(2),
		Rules:      []models.Rule{{Type: "Throttle", Matcher: models.RuleMatcher{Kind: "k"}, MaxConcurrency: 5}},
	}))
	if !slices.Equal(got, []string{"j-1"}) {
		t.Fatalf("assigned %v, want only j-1", got)
	}
}

func TestOrderInsideProject(t *testing.T) {
	t.Parallel()
	by := func(creator string, prio int) func(*orchestrator.TaskInfo) {
		return func(t *orchestrator.TaskInfo) { t.CreatedBy, t.Priority = creator, prio }
	}
	notBefore := func(d time.Duration) func(*orchestrator.TaskInfo) {
		return func(t *orchestrator.TaskInfo) { t.NotBefore = ptr(t0.Add(d)) }
	}
	tests := []struct {
		name    string
		ready   []orchestrator.TaskInfo
		running []orchestrator.TaskInfo
		agents  int
		want    []string
	}{
		{
			name:   "priority ascending",
			ready:  []orchestrator.TaskInfo{task("p50", "a", 1, by("alice", 50)), task("p10", "a", 2, by("alice", 10)), task("p100", "a", 0, by("alice", 100))},
			agents: 3,
			want:   []string{"p10", "p50", "p100"},
		},
		{
			name: "creators alternate",
			ready: []orchestrator.TaskInfo{
				task("a1", "a", 1, by("alice", 5)), task("a2", "a", 2, by("alice", 5)), task("a3", "a", 3, by("alice", 5)),
				task("a4", "a", 4, by("alice", 5)), task("a5", "a", 5, by("alice", 5)),
				task("b1", "a", 10, by("bob", 5)), task("b2", "a", 11, by("bob", 5)),
			},
			agents: 7,
			want:   []string{"a1", "b1", "a2", "b2", "a3", "a4", "a5"},
		},
		{
			name:    "creator with fewer running tasks first",
			ready:   []orchestrator.TaskInfo{task("a1", "a", 1, by("alice", 5)), task("a2", "a", 2, by("alice", 5)), task("b1", "a", 10, by("bob", 5))},
			running: []orchestrator.TaskInfo{running("r1", "a", by("alice", 5)), running("r2", "a", by("alice", 5)), running("r3", "b", by("bob", 5))},
			agents:  3,
			want:    []string{"b1", "a1", "a2"},
		},
		{
			name:   "priority before creators",
			ready:  []orchestrator.TaskInfo{task("a1", "a", 1, by("alice", 5)), task("a2", "a", 2, by("alice", 5)), task("b1", "a", 0, by("bob", 9))},
			agents: 3,
			want:   []string{"a1", "a2", "b1"},
		},
		{
			name: "priority zero first and first in first out",
			ready: []orchestrator.TaskInfo{
				task("n1", "a", 0, by("carol", 1)),
				task("c1", "a", 1, by("alice", 0)), task("c2", "a", 2, by("alice", 0)), task("c3", "a", 3, by("bob", 0)),
			},
			agents: 4,
			want:   []string{"c1", "c2", "c3", "n1"},
		},
		{
			name: "same age by id",
			ready: []orchestrator.TaskInfo{
				task("zeta", "a", 1, by("alice", 0)), task("alpha", "a", 1, by("alice", 0)),
			},
			agents: 2,
			want:   []string{"alpha", "zeta"},
		},
		{
			name: "not_before respected",
			ready: []orchestrator.TaskInfo{
				task("later", "a", 1, notBefore(25*time.Hour)), task("due", "a", 2, notBefore(24*time.Hour)),
				task("past", "a", 3, notBefore(time.Hour)), task("never-set", "a", 4),
			},
			agents: 4,
			want:   []string{"due", "past", "never-set"},
		},
		{
			name: "only READY tasks",
			ready: []orchestrator.TaskInfo{
				task("defined", "a", 1, func(t *orchestrator.TaskInfo) { t.Status = models.StatusDefined }),
				task("paused", "a", 2, func(t *orchestrator.TaskInfo) { t.Status = models.StatusPaused }),
				task("ready", "a", 3),
				task("orphan", "nowhere", 0),
			},
			agents: 4,
			want:   []string{"ready"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := taskIDs(schedule(t, orchestrator.Snapshot{
				Projects:   []orchestrator.ProjectState{proj("a")},
				Ready:      tc.ready,
				Running:    tc.running,
				IdleAgents: agents(tc.agents),
			}))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("order %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAgentsRestrictedToProjects(t *testing.T) {
	t.Parallel()
	got := schedule(t, orchestrator.Snapshot{
		Projects: []orchestrator.ProjectState{proj("a"), proj("b"), proj("c")},
		Ready:    append(tasksFor("a", 3, 0), tasksFor("b", 3, 0)...),
		IdleAgents: []orchestrator.AgentInfo{
			{ID: "only-c", Projects: []string{"c"}},
			{ID: "only-b", Projects: []string{"b"}},
			{ID: "any"},
			{ID: "a-or-b", Projects: []string{"b", "a"}},
		},
	})
	agentOf := map[string]string{}
	for _, a := range got {
		agentOf[a.AgentID] = a.ProjectID
	}
	if _, ok := agentOf["only-c"]; ok {
		t.Errorf("agent restricted to c took %s's task", agentOf["only-c"])
	}
	if agentOf["only-b"] != "b" {
		t.Errorf("agent restricted to b took %q", agentOf["only-b"])
	}
	if p := agentOf["a-or-b"]; p != "a" && p != "b" {
		t.Errorf("agent restricted to a, b took %q", p)
	}
	if len(got) != 3 {
		t.Fatalf("got %d assignments, want 3: %v", len(got), got)
	}
}

// TestAgentTypeRouting checks that a task routed to an agent type goes
// only to an agent of that type, that it does not hold back the tasks
// behind it, and that its waiting reason says which type it waits for.
func TestAgentTypeRouting(t *testing.T) {
	t.Parallel()
	typed := func(typ string) func(*orchestrator.TaskInfo) {
		return func(t *orchestrator.TaskInfo) { t.AgentType = typ }
	}
	claude := orchestrator.AgentInfo{ID: "a-claude", AgentType: "claude"}
	codex := orchestrator.AgentInfo{ID: "b-codex", AgentType: "codex"}
	codexOfB := orchestrator.AgentInfo{ID: "c-codex", AgentType: "codex", Projects: []string{"b"}}
	tests := []struct {
		name  string
		ready []orchestrator.TaskInfo
		idle  []orchestrator.AgentInfo
		known []orchestrator.AgentInfo
		// want maps each assigned task to its agent; waiting, the waiting
		// code and reason of tasks not assigned.
		want    map[string]string
		waiting map[string]orchestrator.Why
	}{
		{name: "a typed task takes an agent of its type, not the first",
			ready: []orchestrator.TaskInfo{task("t1", "a", 0, typed("codex"))},
			idle:  []orchestrator.AgentInfo{claude, codex},
			want:  map[string]string{"t1": "b-codex"}},
		{name: "an untyped task takes any agent",
			ready: []orchestrator.TaskInfo{task("t1", "a", 0)},
			idle:  []orchestrator.AgentInfo{codex},
			want:  map[string]string{"t1": "b-codex"}},
		{name: "a typed task with no free agent of its type lets a younger task start",
			ready: []orchestrator.TaskInfo{task("t1", "a", 0, typed("codex")), task("t2", "a", 1)},
			idle:  []orchestrator.AgentInfo{claude},
			known: []orchestrator.AgentInfo{claude, codex},
			want:  map[string]string{"t2": "a-claude"},
			waiting: map[string]orchestrator.Why{"t1": {Code: models.WaitingAgentType,
				Reason: "every agent of type codex that works on project a is busy"}}},
		{name: "no agent of the type at all",
			ready: []orchestrator.TaskInfo{task("t1", "a", 0, typed("aider"))},
			idle:  []orchestrator.AgentInfo{claude, codex},
			known: []orchestrator.AgentInfo{claude, codex},
			want:  map[string]string{},
			waiting: map[string]orchestrator.Why{"t1": {Code: models.WaitingAgentType,
				Reason: "no agent of type aider works on project a"}}},
		{name: "an agent of the type restricted to another project",
			ready: []orchestrator.TaskInfo{task("t1", "a", 0, typed("codex")), task("t2", "b", 0, typed("codex"))},
			idle:  []orchestrator.AgentInfo{codexOfB},
			known: []orchestrator.AgentInfo{codexOfB},
			want:  map[string]string{"t2": "c-codex"},
			waiting: map[string]orchestrator.Why{"t1": {Code: models.WaitingAgentType,
				Reason: "no agent of type codex works on project a"}}},
		{name: "an untyped task leaves the agent a typed task needs",
			ready: []orchestrator.TaskInfo{task("t1", "a", 0), task("t2", "a", 1, typed("claude"))},
			idle:  []orchestrator.AgentInfo{claude, codex},
			want:  map[string]string{"t1": "b-codex", "t2": "a-claude"}},
		{name: "two typed tasks share out the agents by type",
			ready: []orchestrator.TaskInfo{task("t1", "a", 0, typed("claude")), task("t2", "a", 1, typed("codex"))},
			idle:  []orchestrator.AgentInfo{codex, claude},
			want:  map[string]string{"t1": "a-claude", "t2": "b-codex"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := orchestrator.Decide(orchestrator.Snapshot{Now: t0.Add(24 * time.Hour),
				Projects: []orchestrator.ProjectState{proj("a"), proj("b")}, Ready: tc.ready, IdleAgents: tc.idle, Agents: tc.known},
				orchestrator.SchedulerConfig{})
			got := map[string]string{}
			for _, as := range d.Assignments {
				got[as.TaskID] = as.AgentID
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("assignments %v, want %v", got, tc.want)
			}
			for id, want := range tc.waiting {
				if d.Waiting[id] != want {
					t.Errorf("%s waits: %+v, want %+v", id, d.Waiting[id], want)
				}
			}
		})
	}
}

// Runner labels: a project that names labels goes only to agents whose
// runner has them all (the daemon's own agents have none), and says why
// it waits when none does. A warm agent (its checkout is of the project's
// repository) is preferred over the first by id.
func TestRunnerLabelsAndWarmAgents(t *testing.T) {
	t.Parallel()
	gpu := func(p *orchestrator.ProjectState) { p.RunnerLabels = []string{"gpu"} }
	repo := func(id string) func(p *orchestrator.ProjectState) {
		return func(p *orchestrator.ProjectState) { p.RepoID = id }
	}
	local := orchestrator.AgentInfo{ID: "a-local"}
	linux := orchestrator.AgentInfo{ID: "b/linux", Labels: []string{"linux"}}
	gpuBox := orchestrator.AgentInfo{ID: "c/gpu", Labels: []string{"gpu", "linux"}}
	warm := orchestrator.AgentInfo{ID: "d-warm", RepoID: "r-web"}
	labelled := func(id, project string, labels ...string) orchestrator.TaskInfo {
		c := task(id, project, 0)
		c.RunnerLabels = labels
		return c
	}
	codexGPU := orchestrator.AgentInfo{ID: "e/codex", AgentType: "codex", Labels: []string{"gpu"}}
	typed := func(c orchestrator.TaskInfo, agentType string) orchestrator.TaskInfo {
		c.AgentType = agentType
		return c
	}
	projectWhy := "no idle agent on a runner labelled gpu serves project a"
	tests := []struct {
		name     string
		projects []orchestrator.ProjectState
		ready    []orchestrator.TaskInfo
		idle     []orchestrator.AgentInfo
		want     map[string]string
		// why is the waiting reason of each task not assigned
		// (projectWhy when empty).
		why map[string]string
	}{
		{name: "a task's own labels take the agent whose runner has them",
			projects: []orchestrator.ProjectState{proj("a")},
			ready:    []orchestrator.TaskInfo{labelled("t1", "a", "gpu")},
			idle:     []orchestrator.AgentInfo{local, linux, gpuBox},
			want:     map[string]string{"t1": "c/gpu"}},
		{name: "a task's labels add to its project's",
			projects: []orchestrator.ProjectState{proj("a", func(p *orchestrator.ProjectState) { p.RunnerLabels = []string{"linux"} })},
			ready:    []orchestrator.TaskInfo{labelled("t1", "a", "gpu"), task("t2", "a", 1)},
			idle:     []orchestrator.AgentInfo{linux, gpuBox},
			want:     map[string]string{"t1": "c/gpu", "t2": "b/linux"}},
		{name: "no agent has a task's labels: it waits and holds back nothing",
			projects: []orchestrator.ProjectState{proj("a")},
			ready:    []orchestrator.TaskInfo{labelled("t1", "a", "macos"), task("t2", "a", 1)},
			idle:     []orchestrator.AgentInfo{linux},
			want:     map[string]string{"t2": "b/linux"},
			why:      map[string]string{"t1": "no agent on a runner labelled macos works on project a"}},
		{name: "the labelled agent is busy with the first labelled task",
			projects: []orchestrator.ProjectState{proj("a")},
			ready:    []orchestrator.TaskInfo{labelled("t1", "a", "gpu"), labelled("t2", "a", "gpu")},
			idle:     []orchestrator.AgentInfo{local, gpuBox},
			want:     map[string]string{"t1": "c/gpu"},
			why:      map[string]string{"t2": "every agent on a runner labelled gpu that works on project a is busy"}},
		{name: "labels and a type together",
			projects: []orchestrator.ProjectState{proj("a")},
			ready:    []orchestrator.TaskInfo{typed(labelled("t1", "a", "gpu"), "codex"), typed(labelled("t2", "a", "linux"), "codex")},
			idle:     []orchestrator.AgentInfo{gpuBox, codexGPU},
			want:     map[string]string{"t1": "e/codex"},
			why:      map[string]string{"t2": "no agent of type codex on a runner labelled linux works on project a"}},
		{name: "a labelled project takes the agent whose runner has the labels",
			projects: []orchestrator.ProjectState{proj("a", gpu)},
			ready:    []orchestrator.TaskInfo{task("t1", "a", 0)},
			idle:     []orchestrator.AgentInfo{local, linux, gpuBox},
			want:     map[string]string{"t1": "c/gpu"}},
		{name: "an unlabelled project takes any agent, the first by id",
			projects: []orchestrator.ProjectState{proj("a")},
			ready:    []orchestrator.TaskInfo{task("t1", "a", 0)},
			idle:     []orchestrator.AgentInfo{gpuBox, local},
			want:     map[string]string{"t1": "a-local"}},
		{name: "no agent has the labels",
			projects: []orchestrator.ProjectState{proj("a", gpu)},
			ready:    []orchestrator.TaskInfo{task("t1", "a", 0), task("t2", "a", 1)},
			idle:     []orchestrator.AgentInfo{local, linux},
			want:     map[string]string{}},
		{name: "the labelled agent goes to the labelled project, the others elsewhere",
			projects: []orchestrator.ProjectState{proj("a", gpu), proj("b")},
			ready:    []orchestrator.TaskInfo{task("t1", "b", 0), task("t2", "a", 1)},
			idle:     []orchestrator.AgentInfo{local, gpuBox},
			want:     map[string]string{"t1": "a-local", "t2": "c/gpu"}},
		{name: "a warm agent is preferred",
			projects: []orchestrator.ProjectState{proj("a", repo("r-web"))},
			ready:    []orchestrator.TaskInfo{task("t1", "a", 0)},
			idle:     []orchestrator.AgentInfo{local, linux, warm},
			want:     map[string]string{"t1": "d-warm"}},
		{name: "a warm agent of another repository is not",
			projects: []orchestrator.ProjectState{proj("a", repo("r-api"))},
			ready:    []orchestrator.TaskInfo{task("t1", "a", 0)},
			idle:     []orchestrator.AgentInfo{warm, local},
			want:     map[string]string{"t1": "a-local"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := orchestrator.Decide(orchestrator.Snapshot{Now: t0.Add(24 * time.Hour), Projects: tc.projects, Ready: tc.ready,
				IdleAgents: tc.idle, Agents: tc.idle}, orchestrator.SchedulerConfig{})
			got := map[string]string{}
			for _, as := range d.Assignments {
				got[as.TaskID] = as.AgentID
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("assignments %v, want %v", got, tc.want)
			}
			for _, c := range tc.ready {
				want, ok := tc.why[c.ID]
				if !ok {
					want = projectWhy
				}
				if _, ok := got[c.ID]; !ok && d.Waiting[c.ID].Reason != want {
					t.Errorf("%s waits: %+v, want %q", c.ID, d.Waiting[c.ID], want)
				}
			}
		})
	}
}

func TestScheduleDoesNotChangeItsInput(t *testing.T) {
	t.Parallel()
	s := orchestrator.Snapshot{
		Now:        t0.Add(time.Hour),
		Projects:   []orchestrator.ProjectState{proj("b"), proj("a")},
		Ready:      append(tasksFor("b", 3, 2), tasksFor("a", 3, 0)...),
		IdleAgents: []orchestrator.AgentInfo{{ID: "z"}, {ID: "y"}},
	}
	before := fmt.Sprintf("%+v", s)
	first := orchestrator.Schedule(s, orchestrator.SchedulerConfig{})
	if after := fmt.Sprintf("%+v", s); after != before {
		t.Fatalf("snapshot changed:\n%s\n%s", before, after)
	}
	if again := orchestrator.Schedule(s, orchestrator.SchedulerConfig{}); !slices.Equal(first, again) {
		t.Fatalf("two runs differ: %v, %v", first, again)
	}
	if first[0].AgentID != "y" {
		t.Fatalf("agents are taken in ID order; first went to %s", first[0].AgentID)
	}
}

func TestDuplicateIDsAreIgnored(t *testing.T) {
	t.Parallel()
	got := schedule(t, orchestrator.Snapshot{
		Projects:   []orchestrator.ProjectState{proj("a"), proj("b"), proj("b")},
		Ready:      []orchestrator.TaskInfo{task("t1", "a", 0), task("t1", "a", 1), task("t2", "a", 2), task("t3", "b", 0)},
		IdleAgents: []orchestrator.AgentInfo{{ID: "x"}, {ID: "x"}, {ID: "y"}, {ID: "z"}},
	})
	if ids := taskIDs(got); !slices.Equal(ids, []string{"t2"}) {
		t.Fatalf("assigned %v, want only t2", ids)
	}
	if got[0].AgentID != "y" {
		t.Fatalf("agent %s, want y", got[0].AgentID)
	}
}

func BenchmarkScheduleRound(b *testing.B) {
	s := orchestrator.Snapshot{Now: t0.Add(48 * time.Hour)}
	creators := []string{"alice", "bob", "carol", "dave"}
	sources := []string{"s3", "gcs", "azure", "local", "ftp"}
	for i := range 20 {
		id := fmt.Sprintf("project-%02d", i)
		s.Projects = append(s.Projects, orchestrator.ProjectState{ID: id, CreditWeight: float64(1 + i%4), MaxConcurrentAgents: 10,
			Status: models.ProjectActive, AgentSeconds: float64(i * 1000), CompletedInWindow: i % 3, Running: 5})
		for j := range 50 {
			s.Ready = append(s.Ready, orchestrator.TaskInfo{ID: fmt.Sprintf("%s-t%02d", id, j), ProjectID: id,
				Priority: []int{0, 10, 100, 100, 100}[j%5], CreatedBy: creators[j%len(creators)],
				SubmissionSeq: int64(j*7 + i), Kind: []string{"ingest", "build"}[j%2],
				Metadata: map[string]string{"source": sources[j%len(sources)]}, Status: models.StatusReady, ExpectedCount: j % 20})
		}
		for j := range 5 {
			s.Running = append(s.Running, orchestrator.TaskInfo{ID: fmt.Sprintf("%s-r%d", id, j), ProjectID: id,
				CreatedBy: creators[j%len(creators)], Kind: "ingest", Metadata: map[string]string{"source": sources[j]},
				Status: models.StatusInProgress, ExpectedCount: 10})
		}
	}
	for i := range 50 {
		a := orchestrator.AgentInfo{ID: fmt.Sprintf("agent-%02d", i)}
		if i%5 == 0 {
			a.Projects = []string{fmt.Sprintf("project-%02d", i%20)}
		}
		s.IdleAgents = append(s.IdleAgents, a)
	}
	s.Rules = []models.Rule{
		{Type: models.RuleConcurrency, Matcher: models.RuleMatcher{Kind: "ingest", Status: "Running", Fields: []string{"source"}}, MaxConcurrency: 30},
		{Type: models.RuleCapacity, Matcher: models.RuleMatcher{Kind: "ingest"}, MaxCapacity: 1500},
		{Type: models.RuleConcurrency, ProjectID: "project-03", Matcher: models.RuleMatcher{Kind: "build"}, MaxConcurrency: 1},
	}
	// Restricted agents may find their project full, so not every agent is
	// used; most are.
	n := len(orchestrator.Schedule(s, orchestrator.SchedulerConfig{}))
	if n < 40 {
		b.Fatalf("%d assignments for 50 agents", n)
	}
	b.ReportAllocs()
	for b.Loop() {
		orchestrator.Schedule(s, orchestrator.SchedulerConfig{})
	}
	b.ReportMetric(float64(n), "assignments/op")
}
