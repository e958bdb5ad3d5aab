package web

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/web/chart"
)

// budgetSpans are the spans the budget page offers, by their query value;
// DefaultBudgetSpan is the one shown without a choice.
var budgetSpans = []budgetSpan{
	{"6h", "6 hours", 6 * time.Hour, 15 * time.Minute},
	{"24h", "24 hours", 24 * time.Hour, time.Hour},
	{"7d", "7 days", 7 * 24 * time.Hour, 6 * time.Hour},
	{"30d", "30 days", 30 * 24 * time.Hour, 24 * time.Hour},
}

// budgetSpan is a span the budget page offers: its query value, its name,
// and the step its charts sum by.
type budgetSpan struct {
	Value, Title string
	Span, Step   time.Duration
}

// DefaultBudgetSpan is the budget page's span when none is chosen.
const DefaultBudgetSpan = "24h"

// noAgent names the usage no agent made (hooks' LLM calls) in the charts.
const noAgent = "hooks (no agent)"

func init() {
	register(Page{Pattern: "GET " + Prefix + "/budget", Template: "budget", Nav: NavBudget, Load: (*Server).loadBudget})
}

// budgetPage is the data of the budget page.
type budgetPage struct {
	Report *models.BudgetReport
	// Span is the chosen span's value; Spans those offered.
	Span  string
	Spans any
	// Series is the token series charted.
	Series models.TokenSeries
	// ByProject and ByAgent are the charts; Totals the span's sums.
	ByProject, ByAgent template.HTML
	ProjectTotals      []total
	AgentTotals        []total
	Total              int64
}

// total is one line's sum over the span.
type total struct {
	Name   string
	Tokens int64
}

func (s *Server) loadBudget(r *http.Request) (any, error) {
	ctx := r.Context()
	span := r.URL.Query().Get("span")
	if span == "" {
		span = DefaultBudgetSpan
	}
	i := slices.IndexFunc(budgetSpans, func(b budgetSpan) bool { return b.Value == span })
	if i < 0 {
		return nil, models.Errorf(models.CodeInvalid, "span: %q is not one of 6h, 24h, 7d, 30d", span)
	}
	b := budgetSpans[i]
	report, err := s.svc.Budget(ctx)
	if err != nil {
		return nil, fmt.Errorf("budget: %w", err)
	}
	agents, err := s.svc.ListAgents(ctx)
	if err != nil {
		return nil, fmt.Errorf("budget: %w", err)
	}
	// The span ends at the end of the current step, so the last bucket
	// is the one filling now.
	until := s.cfg.Now().UTC().Truncate(b.Step).Add(b.Step)
	series, err := s.svc.TokenSeries(ctx, models.TokenSeriesQuery{Since: until.Add(-b.Span), Until: until, Step: models.Duration(b.Step)})
	if err != nil {
		return nil, err
	}
	names := map[string]string{"": noAgent}
	for _, a := range agents {
		names[a.ID] = a.Name
	}
	projectNames := map[string]string{}
	for _, p := range report.Projects {
		projectNames[p.ProjectID] = p.Name
	}
	p := budgetPage{Report: &report, Span: span, Spans: budgetSpans, Series: series}
	p.ByProject, p.ProjectTotals, err = tokenChart(series, "Tokens per "+stepName(b.Step)+" by project",
		func(bk models.TokenBucket) string { return nameOr(projectNames, bk.ProjectID) })
	if err != nil {
		return nil, err
	}
	p.ByAgent, p.AgentTotals, err = tokenChart(series, "Tokens per "+stepName(b.Step)+" by agent",
		func(bk models.TokenBucket) string { return nameOr(names, bk.AgentID) })
	if err != nil {
		return nil, err
	}
	for _, t := range p.ProjectTotals {
		p.Total += t.Tokens
	}
	return p, nil
}

func nameOr(names map[string]string, id string) string {
	if n, ok := names[id]; ok && n != "" {
		return n
	}
	return id
}

func stepName(d time.Duration) string {
	switch d {
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	}
	return models.Duration(d).String()
}

// tokenChart charts a series' buckets grouped by key: one line per key
// (by name), a point for every step of the span (zero where nothing was
// used), and the keys' sums, largest first.
func tokenChart(ts models.TokenSeries, title string, key func(models.TokenBucket) string) (template.HTML, []total, error) {
	step := ts.Step.Std()
	n := int(ts.Until.Sub(ts.Since) / step)
	values := map[string][]float64{}
	sums := map[string]int64{}
	for _, bk := range ts.Buckets {
		k := key(bk)
		if values[k] == nil {
			values[k] = make([]float64, n)
		}
		if i := int(bk.Start.Sub(ts.Since) / step); i >= 0 && i < n {
			values[k][i] += float64(bk.Tokens)
		}
		sums[k] += bk.Tokens
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	c := chart.Chart{Title: title, Unit: "tokens", From: ts.Since, To: ts.Since.Add(time.Duration(max(n-1, 1)) * step)}
	var totals []total
	for _, k := range keys {
		s := chart.Series{Name: k}
		for i, v := range values[k] {
			s.Points = append(s.Points, chart.Point{T: ts.Since.Add(time.Duration(i) * step), V: v})
		}
		c.Series = append(c.Series, s)
		totals = append(totals, total{k, sums[k]})
	}
	slices.SortStableFunc(totals, func(a, b total) int {
		switch {
		case a.Tokens > b.Tokens:
			return -1
		case a.Tokens < b.Tokens:
			return 1
		}
		return 0
	})
	var b bytes.Buffer
	if err := chart.WriteSVG(&b, c); err != nil {
		return "", nil, fmt.Errorf("chart %s: %w", title, err)
	}
	return template.HTML(b.String()), totals, nil //nolint:gosec // chart.WriteSVG escapes every text it writes
}
