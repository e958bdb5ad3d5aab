package orchestrator

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"text/template"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

//go:embed prompt.tmpl
var promptText string

// promptTemplate renders every prompt an adapter receives, work and review
// alike, from a models.TaskContext.
var promptTemplate = template.Must(template.New("prompt").Funcs(template.FuncMap{
	"join": strings.Join,
	// indent keeps a multi-line text inside its list item.
	"indent": func(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ") },
	// hasServer reports whether the run gets the MCP server named name.
	"hasServer": func(servers []models.MCPServer, name string) bool {
		return slices.ContainsFunc(servers, func(s models.MCPServer) bool { return s.Name == name })
	},
}).Parse(promptText))

// RenderPrompt renders the prompt of a task context.
func RenderPrompt(tc models.TaskContext) (string, error) {
	var b strings.Builder
	if err := promptTemplate.Execute(&b, tc); err != nil {
		return "", fmt.Errorf("render prompt of %s: %w", tc.TaskID, err)
	}
	return strings.TrimSpace(b.String()) + "\n", nil
}

// taskContext assembles what the agent is told about a task at dispatch:
// its own fields (its test commands, else its project p's), the workspace, and what upstream tasks, earlier attempts
// and people left for it.
func (o *Orchestrator) taskContext(ctx context.Context, p models.Project, t models.Task, ws models.Workspace, attempt int) (models.TaskContext, error) {
	tc := models.TaskContext{TaskID: t.ID, Title: t.Title, Description: t.Description,
		AcceptanceCriteria: t.AcceptanceCriteria, TestCommands: p.Settings.TestCommandsFor(t), CheckoutPath: ws.Dir,
		BranchName: ws.Branch, DefaultBranch: ws.DefaultBranch, Attempt: attempt, Run: models.RunPlaceOf(t)}
	ac := &tc.AttachedContext
	ac.Conflicts, ac.Rescued = ws.Conflicts, ws.Rescued
	var err error
	if ac.Upstream, err = o.store.UpstreamResults(ctx, t.ID); err != nil {
		return tc, err
	}
	if ac.PreviousFailures, err = o.store.RunErrors(ctx, t.ID); err != nil {
		return tc, err
	}
	questions, err := o.store.TaskQuestions(ctx, t.ID)
	if err != nil {
		return tc, err
	}
	for _, q := range questions {
		switch {
		case q.Answer != nil:
			ac.Answers = append(ac.Answers, models.Answer{Question: strings.TrimSpace(q.Text), Answer: strings.TrimSpace(*q.Answer)})
		case q.ExpiredAt != nil:
			ac.Answers = append(ac.Answers, models.Answer{Question: strings.TrimSpace(q.Text), Expired: true,
				Answer: fmt.Sprintf("(no answer: the question expired after %s; go on without it, or ask again)",
					q.ExpiresAt.Sub(q.AskedAt).Round(time.Second))})
		}
	}
	feedback, err := o.store.TaskFeedback(ctx, t.ID)
	if err != nil {
		return tc, err
	}
	for _, f := range feedback {
		if f.Verdict != models.VerdictApprove {
			ac.Feedback = append(ac.Feedback, fmt.Sprintf("%s: %s", f.Source, f.Text))
		}
	}
	if !t.IsPlanSubtask {
		tc.PlanPaths = o.cfg.PlanPaths
	}
	return tc, nil
}

// profile resolves the profile of a run: the task's named profile, else the
// project's default, over the agent's own settings.
func (o *Orchestrator) profile(a models.Agent, p models.Project, t models.Task) (models.Profile, error) {
	name := t.Profile
	if name == "" {
		name = p.Settings.DefaultProfile
	}
	if name == "" {
		return a.Profile, nil
	}
	named, ok := o.cfg.Profiles[name]
	if !ok {
		return models.Profile{}, models.Errorf(models.CodeInvalid, "profile %q is not configured", name)
	}
	return a.Profile.Merge(named), nil
}

// mcpServers lists the MCP servers of a run: agentqueued's own first (when
// the daemon knows its executable), then the profile's.
func (o *Orchestrator) mcpServers(prof models.Profile, runEnv map[string]string) []models.MCPServer {
	var out []models.MCPServer
	if o.cfg.Executable != "" {
		env := map[string]string{}
		for _, k := range []string{"AQ_SOCKET", "AQ_TASK_ID", "AQ_RUN_TOKEN"} {
			env[k] = runEnv[k]
		}
		out = append(out, models.MCPServer{Name: "agentqueued", Command: o.cfg.Executable, Args: []string{"mcp"}, Env: env})
	}
	for _, s := range prof.MCPServers {
		if s.Name != "agentqueued" {
			out = append(out, s)
		}
	}
	return out
}
