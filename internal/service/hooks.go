package service

import (
	"context"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the service's hook operations: the store's, with
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

// ListHooks lists the hooks of a project, or of all projects when
// projectID is empty (the store's, an unknown project not_found, secrets
// redacted).
func (s *Service) ListHooks(ctx context.Context, projectID string) ([]models.Hook, error) {
	if projectID != "" {
		if _, err := s.store.GetProject(ctx, projectID); err != nil {
			return nil, err
		}
	}
	hs, err := s.store.ListHooks(ctx, projectID)
	return redacted(hs), err
}

// GetHook returns a hook (the store's, its secrets redacted).
func (s *Service) GetHook(ctx context.Context, id string) (models.Hook, error) {
	h, err := s.store.GetHook(ctx, id)
	return h.Redacted(), err
}

// CreateHook creates a hook after the hook engine's checks of its steps.
func (s *Service) CreateHook(ctx context.Context, h models.Hook) (models.Hook, error) {
	if err := h.Validate(); err != nil {
		return models.Hook{}, err
	}
	if err := s.hooks.Check(ctx, h); err != nil {
		return models.Hook{}, err
	}
	h, err := s.store.CreateHook(ctx, h)
	return h.Redacted(), err
}

// UpdateHook changes a hook after the hook engine's checks of the result.
func (s *Service) UpdateHook(ctx context.Context, id string, p models.HookPatch) (models.Hook, error) {
	cur, err := s.store.GetHook(ctx, id)
	if err != nil {
		return models.Hook{}, err
	}
	next := p.Apply(cur, cur.UpdatedAt)
	if err := next.Validate(); err != nil {
		return models.Hook{}, err
	}
	if err := s.hooks.Check(ctx, next); err != nil {
		return models.Hook{}, err
	}
	h, err := s.store.UpdateHook(ctx, id, p)
	return h.Redacted(), err
}

// FireHook fires a hook by hand (the hook engine's).
func (s *Service) FireHook(ctx context.Context, id, by string, f models.HookFire) (models.HookRun, error) {
	return s.hooks.Fire(ctx, id, by, f)
}

// DeleteHook deletes a hook with its runs (the store's).
func (s *Service) DeleteHook(ctx context.Context, id string) error {
	return s.store.DeleteHook(ctx, id)
}

// ListHookRuns lists hook runs, newest first (the store's).
func (s *Service) ListHookRuns(ctx context.Context, f models.HookRunFilter) ([]models.HookRun, error) {
	return s.store.ListHookRuns(ctx, f)
}

// ListHookRunsAfter lists hook runs, newest first, after the run afterID
// (the store's).
func (s *Service) ListHookRunsAfter(ctx context.Context, f models.HookRunFilter, afterID string) ([]models.HookRun, error) {
	return s.store.ListHookRunsAfter(ctx, f, afterID)
}

// GetHookRun returns a hook run (the store's).
func (s *Service) GetHookRun(ctx context.Context, id string) (models.HookRun, error) {
	return s.store.GetHookRun(ctx, id)
}
