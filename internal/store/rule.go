package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// maxNamedTasks caps the tasks a refusal names.
const maxNamedTasks = 3

// ruleCache holds the rules in force as this store last read or wrote
// them, for readers that must not do I/O (the scheduler's round).
type ruleCache struct{ rules []models.Rule }

// Rules returns the rule set in force.
func (s *Store) Rules(ctx context.Context) (models.RuleSet, error) {
	rs, err := readRuleSet(ctx, s.rdb)
	if err != nil {
		return models.RuleSet{}, fmt.Errorf("read rules: %w", err)
	}
	return rs, nil
}

// CurrentRules returns the rules in force without I/O: those InitRules
// loaded or ReplaceRules last wrote (nil before InitRules).
func (s *Store) CurrentRules() []models.Rule {
	if c := s.ruleCache.Load(); c != nil {
		return c.rules
	}
	return nil
}

func readRuleSet(ctx context.Context, q queryer) (models.RuleSet, error) {
	rs := models.RuleSet{Rules: []models.Rule{}}
	var updated int64
	err := q.QueryRowContext(ctx, "SELECT source, updated_at, updated_by FROM rule_set WHERE id = 1").
		Scan(&rs.Source, &updated, &rs.UpdatedBy)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return rs, nil
	case err != nil:
		return rs, err
	}
	at := fromNanos(updated)
	rs.UpdatedAt = &at
	rows, err := q.QueryContext(ctx, "SELECT body FROM rules ORDER BY position")
	if err != nil {
		return rs, err
	}
	defer rows.Close()
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return rs, err
		}
		var r models.Rule
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			return rs, fmt.Errorf("stored rule %s: %w", body, err)
		}
		rs.Rules = append(rs.Rules, r)
	}
	return rs, rows.Err()
}

// writeRuleSet replaces the stored set.
func writeRuleSet(ctx context.Context, tx *sql.Tx, rules []models.Rule, source, by string, at int64) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM rules"); err != nil {
		return err
	}
	for i, r := range rules {
		body, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO rules (position, body) VALUES (?, ?)", i, string(body)); err != nil {
			return err
		}
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO rule_set (id, source, updated_at, updated_by) VALUES (1, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET source = excluded.source, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
		source, at, by)
	return err
}

// InitRules loads the rule set at start, given the configuration file's
// rules. A set last replaced through the API is kept whatever the file
// says (a difference is logged). Otherwise the file's rules become the set,
// so that editing the file and restarting changes them, as it always did.
// It returns the set in force.
func (s *Store) InitRules(ctx context.Context, fromConfig []models.Rule) (models.RuleSet, error) {
	if err := models.ValidateRules("rules", fromConfig); err != nil {
		return models.RuleSet{}, err
	}
	var rs models.RuleSet
	s.rulesMu.Lock()
	defer s.rulesMu.Unlock()
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		cur, err := readRuleSet(ctx, tx)
		if err != nil {
			return err
		}
		switch {
		case cur.Source == models.RulesFromAPI:
			if len(fromConfig) > 0 && !sameRules(cur.Rules, fromConfig) {
				s.log.Warn("the configuration file's rules differ from those set through the API, which stay in force; replace them with `agentqueued ctl rule set --file`",
					"config_rules", len(fromConfig), "rules", len(cur.Rules), "updated_by", cur.UpdatedBy)
			}
			rs = cur
			return nil
		case cur.Source == "" && len(fromConfig) == 0:
			rs = cur
			return nil
		case cur.Source == models.RulesFromConfig && sameRules(cur.Rules, fromConfig):
			rs = cur
			return nil
		}
		now := s.now().UTC()
		// The file is the operator's own: its rules are taken, and waiting
		// tasks they could never start are reported rather than refused.
		for i, r := range fromConfig {
			if err := checkWaitingCapacity(ctx, tx, i, r); models.ErrorCodeOf(err) == models.CodeConflict {
				s.log.Warn("a Capacity rule of the configuration file leaves waiting tasks it could never start or count",
					"rule", models.RuleName("rules", i, r), "err", models.ErrorMessageOf(err))
			} else if err != nil {
				return err
			}
		}
		if err := writeRuleSet(ctx, tx, fromConfig, models.RulesFromConfig, "config", toNanos(now)); err != nil {
			return err
		}
		rs = models.RuleSet{Rules: slices.Clone(fromConfig), Source: models.RulesFromConfig, UpdatedAt: &now, UpdatedBy: "config"}
		if rs.Rules == nil {
			rs.Rules = []models.Rule{}
		}
		return nil
	})
	if err != nil {
		return models.RuleSet{}, fmt.Errorf("load rules: %w", err)
	}
	s.ruleCache.Store(&ruleCache{rules: rs.Rules})
	return rs, nil
}

func sameRules(a, b []models.Rule) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return string(ja) == string(jb)
}

// ReplaceRules replaces the whole rule set, all or nothing, and keeps it
// across restarts (source "api"). Every rule is validated (the first bad
// one named), and a Capacity rule is refused while waiting tasks (DEFINED,
// READY, PAUSED, FAILED) it applies to have no expected_count or one
// larger than its max_capacity: they could never start, or would run
// uncounted. by names who replaced it.
func (s *Store) ReplaceRules(ctx context.Context, rules []models.Rule, by string) (models.RuleSet, error) {
	if err := models.CheckLine("actor", by, models.MaxActorLen); err != nil {
		return models.RuleSet{}, err
	}
	if strings.TrimSpace(by) == "" {
		by = "api"
	}
	rules = slices.Clone(rules)
	if err := models.ValidateRules("rules", rules); err != nil {
		return models.RuleSet{}, err
	}
	now := s.now().UTC()
	s.rulesMu.Lock()
	defer s.rulesMu.Unlock()
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		for i, r := range rules {
			if r.ProjectID != "" {
				var n int
				if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM projects WHERE id = ?", r.ProjectID).Scan(&n); err != nil {
					return err
				}
				if n == 0 {
					return models.Errorf(models.CodeInvalid, "rules[%d].project_id: no project %s exists", i, models.Quote(r.ProjectID))
				}
			}
			if err := checkWaitingCapacity(ctx, tx, i, r); err != nil {
				return err
			}
		}
		return writeRuleSet(ctx, tx, rules, models.RulesFromAPI, by, toNanos(now))
	})
	if err != nil {
		return models.RuleSet{}, fmt.Errorf("replace rules: %w", err)
	}
	if rules == nil {
		rules = []models.Rule{}
	}
	s.ruleCache.Store(&ruleCache{rules: rules})
	s.log.Info("rules replaced", "rules", len(rules), "by", by)
	s.changed() // a looser rule may let waiting work start
	return models.RuleSet{Rules: rules, Source: models.RulesFromAPI, UpdatedAt: &now, UpdatedBy: by}, nil
}

// checkWaitingCapacity refuses Capacity rule r (rules[i]) when waiting
// tasks it applies to could never start under it or would run uncounted
// (a workflow's tasks excepted, as at their creation).
func checkWaitingCapacity(ctx context.Context, tx *sql.Tx, i int, r models.Rule) error {
	if r.Type.Canonical() != models.RuleCapacity {
		return nil
	}
	q := `SELECT id, expected_count FROM tasks WHERE status IN ('DEFINED', 'READY', 'PAUSED', 'FAILED')
		AND workflow_run_id IS NULL AND (expected_count <= 0 OR expected_count > ?)`
	args := []any{r.MaxCapacity}
	if r.ProjectID != "" {
		q += " AND project_id = ?"
		args = append(args, r.ProjectID)
	}
	if r.Matcher.Kind != "" {
		q += " AND kind = ?"
		args = append(args, r.Matcher.Kind)
	}
	q += " ORDER BY submission_seq LIMIT ?"
	args = append(args, maxNamedTasks+1)
	rows, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var named []string
	more := false
	for rows.Next() {
		var id string
		var expected int
		if err := rows.Scan(&id, &expected); err != nil {
			return err
		}
		if len(named) == maxNamedTasks {
			more = true
			break
		}
		if expected <= 0 {
			named = append(named, id+" (no expected_count)")
		} else {
			named = append(named, fmt.Sprintf("%s (expected_count %d)", id, expected))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(named) == 0 {
		return nil
	}
	list := strings.Join(named, ", ")
	if more {
		list += ", …"
	}
	return models.Errorf(models.CodeConflict,
		"%s: the Capacity rule (max_capacity %d) applies to waiting tasks it would never start or could not count: %s; give them an expected_count of 1 to %d (recreate them), delete them, or change the rule",
		models.RuleName("rules", i, r), r.MaxCapacity, list, r.MaxCapacity)
}

// checkRules checks each new entry but a workflow's against the rule set
// in force and its own rules, in the creating transaction (so a rule set replaced at the
// same time is seen whole): a Capacity rule that applies needs an
// expected_count no larger than its max_capacity. An entry's own rules
// count the tasks of its project: a project_id on them must be its own.
func (x *txn) checkRules(entries []*entry) error {
	rs, err := readRuleSet(x.ctx, x)
	if err != nil {
		return err
	}
	for _, e := range entries {
		// A workflow's tasks are checked by their run (workflow.CheckRules
		// at its start, workflow.CheckTaskRules as each step makes them):
		// its later tasks are created in the transaction of an upstream's
		// completion, which a refusal here would undo; their step is
		// stopped with the reason instead.
		if e.skipped() || e.src.Workflow != nil {
			continue
		}
		// The entry's name is formatted only for an error: a batch has up
		// to MaxBatchSize entries.
		where := func() string {
			if e.src.LocalID != "" {
				return fmt.Sprintf("tasks[%d] (%s)", e.index, e.src.LocalID)
			}
			return fmt.Sprintf("tasks[%d]", e.index)
		}
		t := &e.task
		if err := models.CheckCapacityRules("rules", rs.Rules, t.ProjectID, t.Kind, t.ExpectedCount); err != nil {
			return models.WrapError(models.CodeInvalid, err, "%s: %s", where(), models.ErrorMessageOf(err))
		}
		if len(e.src.Rules) == 0 {
			continue
		}
		own := slices.Clone(e.src.Rules)
		for j := range own {
			if own[j].ProjectID != "" && own[j].ProjectID != t.ProjectID {
				return models.Errorf(models.CodeInvalid, "%s: %s: project_id %s: a task's rules count the tasks of its own project (%s)",
					where(), models.RuleName("rules", j, own[j]), models.Quote(own[j].ProjectID), t.ProjectID)
			}
			own[j].ProjectID = t.ProjectID
			own[j].Type = own[j].Type.Canonical()
		}
		t.Rules = own
	}
	return nil
}
