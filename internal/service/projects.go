package service

import (
	"context"
	"slices"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the service's project operations: the store's, with the
// profiles a project's settings name and its repository checked before it
// is stored, and landing through the orchestrator. Every project answered
// is redacted (models.Project.Redacted: its repository URL without
// credentials), so that no client shows one.

// CreateProject creates a project after checking the profiles its settings
// name and its repository.
func (s *Service) CreateProject(ctx context.Context, p models.Project) (models.Project, error) {
	if err := s.checkSettings(p.Settings); err != nil {
		return models.Project{}, err
	}
	check := p
	check.ApplyDefaults()
	if err := check.Validate(); err != nil {
		return models.Project{}, err
	}
	if err := s.checkRepo(ctx, check.Repo); err != nil {
		return models.Project{}, err
	}
	return redactedProject(s.store.CreateProject(ctx, p))
}

// UpdateProject updates a project after checking the profiles its new
// settings name and its new repository.
func (s *Service) UpdateProject(ctx context.Context, id string, patch models.ProjectPatch) (models.Project, error) {
	if patch.Settings != nil || patch.SettingsMerge != nil || patch.Repo != nil {
		cur, err := s.store.GetProject(ctx, id)
		if err != nil {
			return models.Project{}, err
		}
		next, err := patch.Apply(cur)
		if err != nil {
			return models.Project{}, err
		}
		if patch.Settings != nil || patch.SettingsMerge != nil {
			if err := s.checkSettings(next.Settings); err != nil {
				return models.Project{}, err
			}
		}
		if patch.Repo != nil {
			if err := s.checkRepo(ctx, next.Repo); err != nil {
				return models.Project{}, err
			}
		}
	}
	return redactedProject(s.store.UpdateProject(ctx, id, patch))
}

func (s *Service) checkSettings(ps models.ProjectSettings) error {
	for _, f := range []struct{ key, name string }{{"default_profile", ps.DefaultProfile}, {"qa_profile", ps.QAProfile}} {
		if f.name != "" && !s.HasProfile(f.name) {
			return models.Errorf(models.CodeInvalid, "settings.%s: no profile %q is configured", f.key, f.name)
		}
	}
	if w := ps.EscalateWebhook; w != "" && !slices.Contains(s.deskWebhooks, w) {
		known := "none"
		if len(s.deskWebhooks) > 0 {
			known = strings.Join(s.deskWebhooks, ", ")
		}
		return models.Errorf(models.CodeInvalid, "settings.escalate_webhook: no desk webhook %q is configured (desk.webhooks has %s)",
			w, known)
	}
	return nil
}

// checkRepo checks a project's repository with the service's checker,
// when it has one.
func (s *Service) checkRepo(ctx context.Context, r *models.RepoConfig) error {
	if r == nil || s.repos == nil {
		return nil
	}
	return s.repos.CheckSource(ctx, *r, s.remoteTimeout)
}

// GetProject returns a project, redacted (the store's).
func (s *Service) GetProject(ctx context.Context, id string) (models.Project, error) {
	return redactedProject(s.store.GetProject(ctx, id))
}

// ListProjects lists the projects, redacted (the store's).
func (s *Service) ListProjects(ctx context.Context) ([]models.Project, error) {
	ps, err := s.store.ListProjects(ctx)
	redactProjects(ps)
	return ps, err
}

// redactedProject passes on a project's answer with the project redacted.
func redactedProject(p models.Project, err error) (models.Project, error) {
	return p.Redacted(), err
}

// redactProjects redacts projects in place.
func redactProjects(ps []models.Project) {
	for i := range ps {
		ps[i] = ps[i].Redacted()
	}
}

// DeleteProject deletes a project with its tasks, hooks and workflows,
// refusing while its work is live (the store's).
func (s *Service) DeleteProject(ctx context.Context, id string) error {
	return s.store.DeleteProject(ctx, id)
}

// LandProject retries a project's waiting landings (the orchestrator's).
func (s *Service) LandProject(ctx context.Context, id string) (models.LandResult, error) {
	return s.orch.Land(ctx, id)
}
