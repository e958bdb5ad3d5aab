package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's printers of hooks and their runs.

// triggerSummary says in a few words when a hook fires.
func triggerSummary(t models.HookTrigger) string {
	switch t.Type {
	case models.TriggerPeriodic:
		return fmt.Sprintf("every %s", time.Duration(t.IntervalSeconds)*time.Second)
	case models.TriggerCron:
		tz := t.Timezone
		if tz == "" {
			tz = "UTC"
		}
		return fmt.Sprintf("cron %s (%s)", t.Expr, tz)
	case models.TriggerEvent:
		s := "on " + t.EventType
		var filters []string
		for _, k := range slices.Sorted(maps.Keys(t.Filters)) {
			filters = append(filters, k+"="+t.Filters[k])
		}
		if len(filters) > 0 {
			s += " where " + strings.Join(filters, ", ")
		}
		return s
	}
	return string(t.Type)
}

func printHooks(w io.Writer, hs []models.Hook) {
	tw := table(w)
	row(tw, "ID", "PROJECT", "NAME", "ENABLED", "TRIGGER", "COOLDOWN", "STEPS", "LLM")
	for _, h := range hs {
		row(tw, h.ID, h.ProjectID, h.Name, strconv.FormatBool(h.Enabled), triggerSummary(h.Trigger),
			(time.Duration(h.CooldownSeconds) * time.Second).String(), strconv.Itoa(len(h.ContextSteps)),
			strconv.FormatBool(h.PromptTemplate != ""))
	}
	tw.Flush()
}

// llmSummary says which LLM a hook calls: none without a prompt template,
// else its overrides (the key only said to be set) or the daemon's.
func llmSummary(h models.Hook) string {
	overrides := llmOverrides(h.LLMConfig)
	switch {
	case h.PromptTemplate == "" && overrides == "":
		return "none (no prompt template: the hook calls no LLM)"
	case h.PromptTemplate == "":
		return "none (no prompt template: the hook calls no LLM; llm_config: " + overrides + ")"
	case overrides == "":
		return "the daemon's (its llm settings)"
	}
	return overrides
}

// llmOverrides describes a hook's LLM overrides, "" when it has none.
func llmOverrides(c *models.HookLLMConfig) string {
	if c == nil {
		return ""
	}
	var parts []string
	if c.Model != "" {
		parts = append(parts, "model "+c.Model)
	}
	if c.BaseURL != "" {
		parts = append(parts, "endpoint "+c.BaseURL)
	}
	if c.APIKey != "" {
		parts = append(parts, "own API key")
	}
	if c.Temperature != nil {
		parts = append(parts, "temperature "+strconv.FormatFloat(float64(*c.Temperature), 'g', -1, 32))
	}
	return strings.Join(parts, ", ")
}

// stepSummary describes one context step by its type and the fields it sets.
func stepSummary(s models.HookStep) string {
	parts := []string{s.Type}
	for _, f := range []struct{ name, v string }{{"path", s.Path}, {"pattern", s.Pattern}, {"base", s.Base}, {"head", s.Head},
		{"since", s.Since}, {"query", s.Query}, {"status", s.Status}, {"url", s.URL}, {"command", s.Command},
		{"skip_llm_if", s.SkipLLMIf}} {
		if f.v != "" {
			parts = append(parts, f.name+"="+f.v)
		}
	}
	if s.MaxCount != 0 {
		parts = append(parts, "max_count="+strconv.Itoa(s.MaxCount))
	}
	if s.TimeoutSeconds != 0 {
		parts = append(parts, "timeout_seconds="+strconv.Itoa(s.TimeoutSeconds))
	}
	return strings.Join(parts, " ")
}

func printHook(w io.Writer, h models.Hook) {
	tw := table(w)
	row(tw, "ID:", h.ID)
	row(tw, "Project:", h.ProjectID)
	row(tw, "Name:", h.Name)
	row(tw, "Enabled:", strconv.FormatBool(h.Enabled))
	row(tw, "Trigger:", triggerSummary(h.Trigger))
	row(tw, "Cooldown:", (time.Duration(h.CooldownSeconds) * time.Second).String())
	maxTokens := "-"
	if h.MaxTokensPerRun != nil {
		maxTokens = strconv.Itoa(*h.MaxTokensPerRun)
	}
	row(tw, "Max tokens per run:", maxTokens)
	row(tw, "LLM:", llmSummary(h))
	row(tw, "Schedule from:", when(h.ScheduleFrom))
	row(tw, "Created:", when(h.CreatedAt))
	row(tw, "Updated:", when(h.UpdatedAt))
	tw.Flush()
	fmt.Fprintf(w, "\nContext steps (%d):\n", len(h.ContextSteps))
	for i, s := range h.ContextSteps {
		fmt.Fprintf(w, "  step_%d: %s\n", i, clean(stepSummary(s)))
	}
	printBlock(w, "Prompt template", h.PromptTemplate)
	if t := h.FileTask; t != nil {
		fmt.Fprintf(w, "\nFiles a task, without a model:\n  title: %s\n", clean(t.Title))
		if t.Kind != "" {
			fmt.Fprintf(w, "  kind: %s\n", clean(t.Kind))
		}
		if t.Priority != nil {
			fmt.Fprintf(w, "  priority: %d\n", *t.Priority)
		}
		printBlock(w, "Its description", t.Description)
	}
}

func printHookRuns(w io.Writer, runs []models.HookRun) {
	tw := table(w)
	row(tw, "RUN", "HOOK", "STATUS", "STARTED", "COMPLETED", "TOKENS", "TRIGGER", "DETAIL")
	for _, r := range runs {
		row(tw, r.ID, r.HookID, string(r.Status), when(r.StartedAt), whenPtr(r.CompletedAt), strconv.FormatInt(r.TokensUsed, 10),
			string(r.TriggerReason), r.TriggerDetail)
	}
	tw.Flush()
}

func printHookRun(w io.Writer, r models.HookRun) {
	tw := table(w)
	row(tw, "Run:", r.ID)
	row(tw, "Hook:", r.HookID)
	row(tw, "Project:", r.ProjectID)
	row(tw, "Status:", string(r.Status))
	row(tw, "Trigger:", string(r.TriggerReason))
	row(tw, "Trigger detail:", r.TriggerDetail)
	row(tw, "Scheduled at:", whenPtr(r.ScheduledAt))
	row(tw, "Started:", when(r.StartedAt))
	row(tw, "Completed:", whenPtr(r.CompletedAt))
	row(tw, "Tokens:", strconv.FormatInt(r.TokensUsed, 10))
	row(tw, "Skipped:", str(r.SkippedReason))
	row(tw, "Error:", r.Error)
	tw.Flush()
	printBlock(w, "Event", indentJSON(str(r.EventData)))
	printBlock(w, "Context", indentJSON(str(r.ContextResults)))
	printBlock(w, "Prompt", str(r.PromptSent))
	printBlock(w, "Answer", str(r.LLMResponse))
	printBlock(w, "Actions", indentJSON(str(r.ActionsTaken)))
}
