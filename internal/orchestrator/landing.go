package orchestrator

import (
	"context"

	"github.com/agentqueued/agentqueued/internal/landing"
	"github.com/agentqueued/agentqueued/internal/models"
)

// This file connects the orchestrator to the Lander that verifies and
// lands its tasks' work (internal/landing): what people and GitHub ask of
// it, and what it asks of the orchestrator.

// Approve is a person's approval of a task (see landing.Lander.Approve).
func (o *Orchestrator) Approve(ctx context.Context, taskID, actor, note string) (models.TransitionResult, error) {
	return o.landing.Approve(ctx, taskID, actor, note)
}

// Reject is a person's rejection, with feedback for the next attempt (see
// landing.Lander.Reject).
func (o *Orchestrator) Reject(ctx context.Context, taskID, actor, feedback string) (models.TransitionResult, error) {
	return o.landing.Reject(ctx, taskID, actor, feedback)
}

// Land retries the waiting landings of a project (see landing.Lander.Land).
func (o *Orchestrator) Land(ctx context.Context, projectID string) (models.LandResult, error) {
	return o.landing.Land(ctx, projectID)
}

// PokePullRequest makes the watcher check owner/repo#number now (see
// landing.Lander.PokePullRequest).
func (o *Orchestrator) PokePullRequest(ctx context.Context, owner, repo string, number int) {
	o.landing.PokePullRequest(ctx, owner, repo, number)
}

// WatchPullRequests checks open pull requests until ctx ends (see
// landing.Lander.WatchPullRequests).
func (o *Orchestrator) WatchPullRequests(ctx context.Context) error {
	return o.landing.WatchPullRequests(ctx)
}

// WatchLandings lands waiting landings by themselves once the working
// tree that held them is clean, until ctx ends (see
// landing.Lander.WatchLandings).
func (o *Orchestrator) WatchLandings(ctx context.Context) error {
	return o.landing.WatchLandings(ctx)
}

// landingHost is the orchestrator as the Lander's host.
type landingHost struct{ o *Orchestrator }

var _ landing.Host = landingHost{}

func (h landingHost) Wake() { h.o.Wake() }

func (h landingHost) RunningFor(taskID string) bool {
	h.o.mu.Lock()
	defer h.o.mu.Unlock()
	for _, r := range h.o.runs {
		if r.run.TaskID == taskID {
			return true
		}
	}
	return false
}

func (h landingHost) Reviewing(taskID string) bool { return h.o.reviewRunning(taskID) }

func (h landingHost) Resting(agentID string) bool { return h.o.coolingDown("agent:" + agentID) }

func (h landingHost) StartReview(ctx context.Context, ag models.Agent, p models.Project, t models.Task, v models.Verification) {
	h.o.startReview(ctx, ag, p, t, v)
}
