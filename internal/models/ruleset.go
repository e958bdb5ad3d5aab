package models

import (
	"fmt"
	"strings"
	"time"
)

// Limits on rule sets and progress counts.
const (
	// MaxRules caps the rules of the rule set and of one task.
	MaxRules = 1000
	// MaxProgressCount caps a progress count of a task without an
	// expected_count: far more items than one task processes, and far from
	// overflowing any sum of them.
	MaxProgressCount = 1_000_000_000
	// MaxExpectedCount caps expected_count for the same reason.
	MaxExpectedCount = MaxProgressCount
)

// Sources of the rule set.
const (
	// RulesFromConfig: the set was taken from the configuration file's
	// rules and follows it at each start.
	RulesFromConfig = "config"
	// RulesFromAPI: the set was last replaced through the API (or ctl);
	// it is kept across restarts whatever the configuration file says.
	RulesFromAPI = "api"
)

// RuleSet is the set of scheduling rules in force, with where it came from.
type RuleSet struct {
	Rules []Rule `json:"rules"`
	// Source is RulesFromConfig, RulesFromAPI, or empty when no rule set
	// was ever stored.
	Source string `json:"source,omitempty"`
	// UpdatedAt and UpdatedBy tell when and by whom the set was last replaced.
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	UpdatedBy string     `json:"updated_by,omitempty"`
}

// ValidateRules checks a list of rules, naming the first bad one as
// what[i] (with its id when it has one): each rule valid, at most MaxRules,
// and no id given twice.
func ValidateRules(what string, rules []Rule) error {
	if len(rules) > MaxRules {
		return Errorf(CodeInvalid, "%s: at most %d rules (got %d)", what, MaxRules, len(rules))
	}
	seen := map[string]int{}
	for i := range rules {
		r := &rules[i]
		r.Type = r.Type.Canonical()
		if err := r.Validate(); err != nil {
			return WrapError(CodeInvalid, err, "%s: %s", RuleName(what, i, *r), ErrorMessageOf(err))
		}
		if r.ID == "" {
			continue
		}
		if j, dup := seen[r.ID]; dup {
			return Errorf(CodeInvalid, "%s: id %s is already used by %s[%d]", RuleName(what, i, *r), Quote(r.ID), what, j)
		}
		seen[r.ID] = i
	}
	return nil
}

// RuleName names a rule in messages: what[i], with its id when it has one.
func RuleName(what string, i int, r Rule) string {
	if r.ID != "" {
		return fmt.Sprintf("%s[%d] (%s)", what, i, r.ID)
	}
	return fmt.Sprintf("%s[%d]", what, i)
}

// CheckCapacityRules checks a task about to be created against the
// Capacity rules that apply to it (what names the list in messages): a task
// a Capacity rule applies to must carry an expected_count, and one no
// larger than the rule's max_capacity, since it could never start
// otherwise. Rules that are not Capacity rules, or do not apply to the
// task's project and kind, are not looked at.
func CheckCapacityRules(what string, rules []Rule, projectID, kind string, expected int) error {
	return checkCapacity(what, rules, expected, func(r Rule) bool { return r.AppliesTo(projectID, kind) })
}

// CheckOwnCapacityRules checks a task about to be created against the
// Capacity rules it carries itself, as CheckCapacityRules does: a task's
// own rules always apply to it.
func CheckOwnCapacityRules(rules []Rule, expected int) error {
	return checkCapacity("rules", rules, expected, func(Rule) bool { return true })
}

func checkCapacity(what string, rules []Rule, expected int, applies func(Rule) bool) error {
	for i, r := range rules {
		if r.Type.Canonical() != RuleCapacity || !applies(r) {
			continue
		}
		switch {
		case expected <= 0:
			return Errorf(CodeInvalid, "expected_count: required: the Capacity rule %s (max_capacity %d) applies to this task, and a task it applies to must say how many items it will process",
				RuleName(what, i, r), r.MaxCapacity)
		case expected > r.MaxCapacity:
			return Errorf(CodeInvalid, "expected_count: %d exceeds max_capacity %d of the Capacity rule %s: the task could never start",
				expected, r.MaxCapacity, RuleName(what, i, r))
		}
	}
	return nil
}

// TaskProgress is an agent's progress report: a message, and the counts of
// items the task's current run has processed so far. The counts are
// cumulative (the totals so far, not increments), so a report repeated or
// retried changes nothing; nil leaves a count as it is.
type TaskProgress struct {
	Message   string `json:"message,omitempty"`
	Succeeded *int   `json:"succeeded,omitempty"`
	Failed    *int   `json:"failed,omitempty"`
}

// HasCounts reports whether the report carries a count.
func (p TaskProgress) HasCounts() bool { return p.Succeeded != nil || p.Failed != nil }

// Validate checks a report on its own: a message or a count, a message of
// text within MaxMessageLen, and counts between 0 and MaxProgressCount.
// The bound by the task's expected_count is the store's to check.
func (p TaskProgress) Validate() error {
	if !p.HasCounts() || p.Message != "" {
		// Without counts a report is its message, as it always was.
		if err := ValidateQuestionText("message", p.Message); err != nil {
			return err
		}
	}
	for _, c := range []struct {
		name string
		v    *int
	}{{"succeeded", p.Succeeded}, {"failed", p.Failed}} {
		if c.v != nil && (*c.v < 0 || *c.v > MaxProgressCount) {
			return Errorf(CodeInvalid, "%s: must be between 0 and %d (got %d)", c.name, MaxProgressCount, *c.v)
		}
	}
	return nil
}

// CheckProgressCounts checks a task's counts after a report against its
// expected_count: when the task has one, succeeded + failed may not exceed it.
func CheckProgressCounts(expected, succeeded, failed int) error {
	if expected > 0 && succeeded+failed > expected {
		return Errorf(CodeInvalid, "succeeded + failed: %d + %d = %d exceeds the task's expected_count %d",
			succeeded, failed, succeeded+failed, expected)
	}
	return nil
}

// Summary describes the rule in one line for people: its limit, what it
// counts and where, e.g. "at most 100 items of remaining work of kind
// ingest per source (Running), project web".
func (r Rule) Summary() string {
	var b strings.Builder
	switch r.Type.Canonical() {
	case RuleCapacity:
		fmt.Fprintf(&b, "at most %d items of remaining work", r.MaxCapacity)
	case RuleConcurrency:
		fmt.Fprintf(&b, "at most %d running", r.MaxConcurrency)
	default:
		fmt.Fprintf(&b, "%s (unknown type)", r.Type)
	}
	if r.Matcher.Kind != "" {
		fmt.Fprintf(&b, " of kind %s", r.Matcher.Kind)
	} else {
		b.WriteString(" of each kind")
	}
	if len(r.Matcher.Fields) > 0 {
		fmt.Fprintf(&b, " per %s", strings.Join(r.Matcher.Fields, ", "))
	}
	status := r.Matcher.Status
	if status == "" {
		status = "Unfinished"
	}
	fmt.Fprintf(&b, " (%s)", status)
	if r.ProjectID != "" {
		fmt.Fprintf(&b, ", project %s", r.ProjectID)
	} else {
		b.WriteString(", all projects")
	}
	return b.String()
}
