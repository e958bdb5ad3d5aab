package models

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
)

// RuleType says what a scheduling rule limits.
type RuleType string

// The rule types of the seed's "Core Concepts".
const (
	// RuleConcurrency caps how many matching tasks may be running at once.
	RuleConcurrency RuleType = "Concurrency"
	// RuleCapacity caps the remaining expected_count work of matching
	// running tasks.
	RuleCapacity RuleType = "Capacity"
)

// RuleTypes lists every rule type.
var RuleTypes = []RuleType{RuleConcurrency, RuleCapacity}

// ruleTypeAliases maps the lower-cased spellings accepted for each type,
// the seed's misspelling "Concurency" included, to the type.
var ruleTypeAliases = map[string]RuleType{
	"concurrency": RuleConcurrency,
	"concurency":  RuleConcurrency,
	"capacity":    RuleCapacity,
}

// Canonical returns the type t names: the spelling is case-insensitive and
// the seed's "Concurency" means Concurrency. An unknown name is returned
// unchanged.
func (t RuleType) Canonical() RuleType {
	if c, ok := ruleTypeAliases[strings.ToLower(strings.TrimSpace(string(t)))]; ok {
		return c
	}
	return t
}

// Valid reports whether t, or the type it is an accepted spelling of, is a
// known rule type.
func (t RuleType) Valid() bool { return slices.Contains(RuleTypes, t.Canonical()) }

// Limits on rule text.
const (
	MaxRuleIDLen   = 100
	MaxRuleKindLen = MaxKindLen
)

// RuleMatcher selects the tasks a rule counts. A task counts against a
// candidate when it has the candidate's kind, its status is in Status, and
// its metadata equals the candidate's on every field of Fields (a missing
// key equals only a missing key). A non-empty Kind also restricts the rule
// to candidates of that kind.
type RuleMatcher struct {
	// Kind restricts the rule to tasks of this kind; empty means every kind
	// (each candidate is still compared with tasks of its own kind).
	Kind string `json:"kind,omitempty"`
	// Status is a status name, a group (Pending, Running, Unfinished,
	// Finished, Any) or several joined with '|'; empty means Unfinished. It
	// must include at least one running status, since rules count running
	// tasks.
	Status string `json:"status,omitempty"`
	// Fields are metadata keys whose values must equal the candidate's.
	Fields []string `json:"fields,omitempty"`
}

// Rule is a scheduling rule from a project's seed: a task never starts while
// starting it would exceed a rule that applies to it.
type Rule struct {
	ID string `json:"id,omitempty"`
	// ProjectID scopes the rule to one project: it applies to that project's
	// tasks and counts only them. Empty means every project.
	ProjectID string      `json:"project_id,omitempty"`
	Type      RuleType    `json:"type"`
	Matcher   RuleMatcher `json:"matcher"`
	// MaxConcurrency is the limit of a Concurrency rule: at most this many
	// matching tasks running, the candidate included.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
	// MaxCapacity is the limit of a Capacity rule: the remaining work of the
	// matching running tasks plus the candidate's must not exceed it.
	MaxCapacity int `json:"max_capacity,omitempty"`
}

// strictObject decodes a JSON object into its members, refusing anything
// that is not an object and any key not in known (the first unknown key in
// sorted order is named; the message lists the known keys without the
// seed's misspelling). what prefixes the messages.
func strictObject(data []byte, what string, known ...string) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return nil, WrapError(CodeInvalid, err, "%s: must be a JSON object", what)
	}
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		shown := slices.DeleteFunc(slices.Clone(known), func(k string) bool { return k == "max_concurency" })
		return nil, Errorf(CodeInvalid, "%s: unknown key %s (known keys: %s)", what, Quote(unknown[0]), strings.Join(shown, ", "))
	}
	return m, nil
}

// decodeMember decodes m[key], when present, into dst; name is the field
// as users know it and kind the expected JSON type, both for the message.
func decodeMember(m map[string]json.RawMessage, key, name, kind string, dst any) (bool, error) {
	raw, ok := m[key]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		var e *Error
		if errors.As(err, &e) {
			return false, err // a nested decoder's message already names the key
		}
		return false, WrapError(CodeInvalid, err, "%s: must be %s", name, kind)
	}
	return true, nil
}

// UnmarshalJSON decodes a matcher strictly: a key other than kind, status
// and fields is an error naming it.
func (m *RuleMatcher) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil
	}
	obj, err := strictObject(data, "matcher", "kind", "status", "fields")
	if err != nil {
		return err
	}
	var out RuleMatcher
	if _, err := decodeMember(obj, "kind", "matcher.kind", "a string", &out.Kind); err != nil {
		return err
	}
	if _, err := decodeMember(obj, "status", "matcher.status", "a string", &out.Status); err != nil {
		return err
	}
	if _, err := decodeMember(obj, "fields", "matcher.fields", "a list of strings", &out.Fields); err != nil {
		return err
	}
	*m = out
	return nil
}

// UnmarshalJSON decodes a rule strictly. The seed's misspellings are
// accepted: type "Concurency" decodes as Concurrency and key
// "max_concurency" as max_concurrency (when both keys are given they must
// agree). The type name is case-insensitive and stored canonically. Any
// other key is an error naming it. Decoding does not validate; call
// [Rule.Validate].
func (r *Rule) UnmarshalJSON(data []byte) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil
	}
	obj, err := strictObject(data, "rule", "id", "project_id", "type", "matcher",
		"max_concurrency", "max_concurency", "max_capacity")
	if err != nil {
		return err
	}
	var out Rule
	var typ string
	for _, f := range []struct {
		key, name, kind string
		dst             any
	}{
		{"id", "id", "a string", &out.ID},
		{"project_id", "project_id", "a string", &out.ProjectID},
		{"type", "type", "a string", &typ},
		{"matcher", "matcher", "a JSON object", &out.Matcher},
		{"max_capacity", "max_capacity", "an integer", &out.MaxCapacity},
	} {
		if _, err := decodeMember(obj, f.key, f.name, f.kind, f.dst); err != nil {
			return err
		}
	}
	out.Type = RuleType(typ).Canonical()
	var right, misspelt int
	hasRight, err := decodeMember(obj, "max_concurrency", "max_concurrency", "an integer", &right)
	if err != nil {
		return err
	}
	hasMisspelt, err := decodeMember(obj, "max_concurency", "max_concurency", "an integer", &misspelt)
	if err != nil {
		return err
	}
	switch {
	case hasRight && hasMisspelt && right != misspelt:
		return Errorf(CodeInvalid, "max_concurrency: given as %d and, misspelt max_concurency, as %d; give one", right, misspelt)
	case hasRight:
		out.MaxConcurrency = right
	case hasMisspelt:
		out.MaxConcurrency = misspelt
	}
	*r = out
	return nil
}

// Validate checks a rule, naming the first bad field: a known type, a
// positive limit for that type (and none for the other), a kind or fields
// to match on, a status set that resolves and includes a running status,
// and a valid project id when scoped.
func (r *Rule) Validate() error {
	if err := CheckLine("id", r.ID, MaxRuleIDLen); err != nil {
		return err
	}
	switch {
	case r.ProjectID != "" && !ValidID(r.ProjectID):
		return Errorf(CodeInvalid, "project_id %s: not a project id", Quote(r.ProjectID))
	case !r.Type.Valid():
		return Errorf(CodeInvalid, "type: must be Concurrency or Capacity (got %s)", Quote(string(r.Type)))
	}
	if err := r.Matcher.validate(); err != nil {
		return err
	}
	switch r.Type.Canonical() {
	case RuleConcurrency:
		if r.MaxConcurrency < 1 {
			return Errorf(CodeInvalid, "max_concurrency: must be at least 1 for a Concurrency rule (got %d)", r.MaxConcurrency)
		}
		if r.MaxCapacity != 0 {
			return Errorf(CodeInvalid, "max_capacity: not used by a Concurrency rule")
		}
	case RuleCapacity:
		if r.MaxCapacity < 1 {
			return Errorf(CodeInvalid, "max_capacity: must be at least 1 for a Capacity rule (got %d)", r.MaxCapacity)
		}
		if r.MaxConcurrency != 0 {
			return Errorf(CodeInvalid, "max_concurrency: not used by a Capacity rule")
		}
	}
	return nil
}

func (m *RuleMatcher) validate() error {
	if err := CheckLine("matcher.kind", m.Kind, MaxRuleKindLen); err != nil {
		return err
	}
	if err := CheckLine("matcher.status", m.Status, MaxShortLen); err != nil {
		return err
	}
	if m.Kind == "" && len(m.Fields) == 0 {
		return Errorf(CodeInvalid, "matcher: a kind or fields are required")
	}
	if err := checkList("matcher.fields", m.Fields, MaxMetadataEntries, func(name, f string) error {
		if f == "" {
			return Errorf(CodeInvalid, "%s: metadata keys are 1-%d characters", name, MaxMetadataKeyLen)
		}
		return CheckLine(name, f, MaxMetadataKeyLen)
	}); err != nil {
		return err
	}
	for i, f := range m.Fields {
		if slices.Contains(m.Fields[:i], f) {
			return Errorf(CodeInvalid, "matcher.fields[%d]: %s is listed twice", i, Quote(f))
		}
	}
	set, err := m.Statuses()
	if err != nil {
		return WrapError(CodeInvalid, err, "matcher.status: %s", ErrorMessageOf(err))
	}
	if !slices.ContainsFunc(set, TaskStatus.Running) {
		return Errorf(CodeInvalid, "matcher.status %s: includes no running status (ASSIGNED, IN_PROGRESS, WAITING_INPUT, VERIFYING, AWAITING_APPROVAL); a rule counts running tasks", Quote(m.Status))
	}
	return nil
}

// Statuses resolves the matcher's status set with [ResolveStatusSet].
func (m *RuleMatcher) Statuses() ([]TaskStatus, error) { return ResolveStatusSet(m.Status) }

// Limit returns the limit of the rule's type: MaxConcurrency or MaxCapacity.
func (r *Rule) Limit() int {
	if r.Type.Canonical() == RuleCapacity {
		return r.MaxCapacity
	}
	return r.MaxConcurrency
}

// RuleTask is what a rule looks at in a task.
type RuleTask struct {
	ProjectID string
	Kind      string
	Metadata  map[string]string
	Status    TaskStatus
}

// AppliesTo reports whether the rule governs starting a task of projectID
// and kind: the rule is global or scoped to projectID, and its matcher names
// no kind or this one.
func (r *Rule) AppliesTo(projectID, kind string) bool {
	return (r.ProjectID == "" || r.ProjectID == projectID) && (r.Matcher.Kind == "" || r.Matcher.Kind == kind)
}

// Matches reports whether other counts against the rule when candidate is
// about to start: the rule applies to the candidate, other is in the rule's
// scope, has the candidate's kind and a status in the matcher's set, and
// equal metadata on every field (a missing key equals only a missing key).
// It resolves the status set on each call; a set that does not resolve
// matches nothing.
func (r *Rule) Matches(candidate, other RuleTask) bool {
	if !r.AppliesTo(candidate.ProjectID, candidate.Kind) ||
		(r.ProjectID != "" && other.ProjectID != r.ProjectID) || other.Kind != candidate.Kind {
		return false
	}
	set, err := r.Matcher.Statuses()
	if err != nil || !slices.Contains(set, other.Status) {
		return false
	}
	for _, f := range r.Matcher.Fields {
		a, okA := candidate.Metadata[f]
		b, okB := other.Metadata[f]
		if okA != okB || a != b {
			return false
		}
	}
	return true
}

// RemainingWork is the work a task has left for capacity rules:
// expected − success − failure, floored at 0.
func RemainingWork(expected, success, failure int) int {
	return max(0, expected-success-failure)
}
