package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/agentqueued/agentqueued/internal/models"
)

// ruleList prints the scheduling rules in force.
func (c *ctl) ruleList(ctx context.Context, args []string) error {
	if _, err := c.parse(c.flagSet("rule list"), args); err != nil {
		return err
	}
	rs, err := c.client.Rules(ctx)
	if err != nil {
		return err
	}
	return c.emit(rs, func(w io.Writer) { printRuleSet(w, rs) })
}

// ruleSet replaces the whole rule set with the rules of a YAML or JSON file.
func (c *ctl) ruleSet(ctx context.Context, args []string) error {
	fs := c.flagSet("rule set")
	file := fs.String("file", "", "the rules, a YAML or JSON `file`: a list of rules, or {rules: [...]} as in the configuration file; an empty list removes them all")
	actor := fs.String("actor", "", "who replaces them (default $USER, else the account's name)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return usagef("ctl rule set: --file is required")
	}
	rules, err := readRulesFile(*file)
	if err != nil {
		return err
	}
	rs, err := c.client.ReplaceRules(ctx, rules, c.actorOf(*actor))
	if err != nil {
		return err
	}
	return c.emit(rs, func(w io.Writer) {
		fmt.Fprintf(w, "rules replaced: %d in force\n\n", len(rs.Rules))
		printRuleSet(w, rs)
	})
}

// readRulesFile reads a list of rules from a YAML or JSON file: the list
// itself or an object with a "rules" key. Each rule is decoded strictly,
// naming the key that is wrong.
func readRulesFile(path string) ([]models.Rule, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read rules: %w", err)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m, ok := doc.(map[string]any); ok {
		for k := range m {
			if k != "rules" {
				return nil, fmt.Errorf("%s: unknown key %q (want a list of rules, or rules: [...])", path, k)
			}
		}
		doc = m["rules"]
	}
	list, ok := doc.([]any)
	if doc != nil && !ok {
		return nil, fmt.Errorf("%s: want a list of rules, or rules: [...]", path)
	}
	rules := make([]models.Rule, 0, len(list))
	for i, raw := range list {
		b, err := json.Marshal(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: rules[%d]: %w", path, i, err)
		}
		var r models.Rule
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("%s: rules[%d]: %s", path, i, models.ErrorMessageOf(err))
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func printRuleSet(w io.Writer, rs models.RuleSet) {
	switch rs.Source {
	case models.RulesFromAPI:
		fmt.Fprintf(w, "Set through the API by %s at %s; kept across restarts.\n", clean(rs.UpdatedBy), whenPtr(rs.UpdatedAt))
	case models.RulesFromConfig:
		fmt.Fprintln(w, "From the configuration file's rules, followed at each start until set through the API.")
	}
	if len(rs.Rules) == 0 {
		fmt.Fprintln(w, "No rules.")
		return
	}
	tw := table(w)
	row(tw, "#", "ID", "TYPE", "LIMIT", "RULE")
	for i, r := range rs.Rules {
		row(tw, strconv.Itoa(i), r.ID, string(r.Type.Canonical()), strconv.Itoa(r.Limit()), r.Summary())
	}
	tw.Flush()
}
