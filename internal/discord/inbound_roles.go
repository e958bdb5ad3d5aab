package discord

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file is the per-project check of who may act on a project's work
// from Discord: a project's discord_roles, when set, keep its answers,
// approvals and rejections to members of those roles (and admins).

// rolesKey carries the acting member's Discord roles in a context.
type rolesKey struct{}

// withRoles returns ctx carrying the acting member's roles.
func withRoles(ctx context.Context, roles []string) context.Context {
	return context.WithValue(ctx, rolesKey{}, roles)
}

// rolesOf returns the acting member's roles carried by ctx.
func rolesOf(ctx context.Context) []string {
	roles, _ := ctx.Value(rolesKey{}).([]string)
	return roles
}

// mayActOn checks that user may act on project projectID's work: an admin
// always may; a project with discord_roles only a member of one of them.
// It returns the refusal to answer with, and false, when user may not.
func (b *Bot) mayActOn(ctx context.Context, projectID, user string) (reply, bool) {
	if b.admin(user) || projectID == "" {
		return reply{}, true
	}
	p, err := b.svc.GetProject(ctx, projectID)
	if err != nil {
		return b.errorReply("check the project's roles", err), false
	}
	want := p.Settings.DiscordRoles
	if len(want) == 0 || slices.ContainsFunc(rolesOf(ctx), func(r string) bool { return slices.Contains(want, r) }) {
		return reply{}, true
	}
	b.log.Warn("discord action refused: the member lacks the project's roles", "user", user, "project_id", projectID)
	mentions := make([]string, len(want))
	for i, r := range want {
		mentions[i] = "<@&" + r + ">"
	}
	return ephemeral(fmt.Sprintf("🚫 Only members of %s may act on the work of project `%s`; nothing was done.",
		strings.Join(mentions, " or "), projectID)), false
}

// mayActOnTask is mayActOn for the project of task taskID.
func (b *Bot) mayActOnTask(ctx context.Context, taskID, user string) (reply, bool) {
	d, err := b.svc.GetTaskDetail(ctx, taskID)
	if err != nil {
		if models.ErrorCodeOf(err) == models.CodeNotFound {
			return reply{}, true // the operation says it is not found
		}
		return b.errorReply("check the project's roles", err), false
	}
	return b.mayActOn(ctx, d.Task.ProjectID, user)
}
