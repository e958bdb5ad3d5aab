package main

import (
	"context"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the command layer's hook operations: the store's, with
// the engine's checks before a hook is saved, secrets kept out of every
// answer, and firing through the engine.

// redacted returns hooks without their secrets.
func redacted(hs []models.Hook) []models.Hook {
	out := make([]models.Hook, len(hs))
	for i, h := range hs {
		out[i] = h.Redacted()
	}
	return out
}

// ListHooks lists the hooks of a project, or of all projects when projectID is empty.
func (c commands) ListHooks(ctx context.Context, projectID string) ([]models.Hook, error) {
	if projectID != "" {
		if _, err := c.Store.GetProject(ctx, projectID); err != nil {
			return nil, err
		}
	}
	hs, err := c.Store.ListHooks(ctx, projectID)
	return redacted(hs), err
}

// GetHook returns a hook.
func (c commands) GetHook(ctx context.Context, id string) (models.Hook, error) {
	h, err := c.Store.GetHook(ctx, id)
	return h.Redacted(), err
}

// CreateHook creates a hook after the engine's checks of its steps.
func (c commands) CreateHook(ctx context.Context, h models.Hook) (models.Hook, error) {
	if err := h.Validate(); err != nil {
		return models.Hook{}, err
	}
	if err := c.hooks.Check(ctx, h); err != nil {
		return models.Hook{}, err
	}
	h, err := c.Store.CreateHook(ctx, h)
	return h.Redacted(), err
}

// UpdateHook changes a hook after the engine's checks of the result.
func (c commands) UpdateHook(ctx context.Context, id string, p models.HookPatch) (models.Hook, error) {
	cur, err := c.Store.GetHook(ctx, id)
	if err != nil {
		return models.Hook{}, err
	}
	next := p.Apply(cur, cur.UpdatedAt)
	if err := next.Validate(); err != nil {
		return models.Hook{}, err
	}
	if err := c.hooks.Check(ctx, next); err != nil {
		return models.Hook{}, err
	}
	h, err := c.Store.UpdateHook(ctx, id, p)
	return h.Redacted(), err
}

// FireHook fires a hook by hand.
func (c commands) FireHook(ctx context.Context, id, by string, f models.HookFire) (models.HookRun, error) {
	return c.hooks.Fire(ctx, id, by, f)
}
