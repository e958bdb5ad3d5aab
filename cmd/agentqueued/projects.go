package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/service"
	"github.com/agentqueued/agentqueued/internal/store"
)

// registerProjects creates the configuration's projects that the database
// lacks; a project that exists is left as it is, so that changes made
// through the API survive a restart. A LINK repository must be a git
// repository: a bad path stops the start with the key named. A remote is
// not asked at start (it may be offline): `agentqueued doctor` asks it.
func registerProjects(ctx context.Context, projects []models.Project, st *store.Store, repos service.SourceChecker, log *slog.Logger) error {
	for i, p := range projects {
		_, err := st.GetProject(ctx, p.ID)
		if err == nil {
			continue
		}
		if models.ErrorCodeOf(err) != models.CodeNotFound {
			return fmt.Errorf("project %s from the configuration: %w", p.ID, err)
		}
		if p.Repo != nil && p.Repo.SourceType == models.RepoLink {
			if err := repos.CheckSource(ctx, *p.Repo, 0); err != nil {
				return &configError{err: fmt.Errorf("config: projects[%d] (%s): %s", i, p.ID,
					replaceFieldName(models.ErrorMessageOf(err), "repo.source_path", "repo.path"))}
			}
		}
		if _, err := st.CreateProject(ctx, p); err != nil {
			return fmt.Errorf("project %s from the configuration: %w", p.ID, err)
		}
		log.Info("project created from the configuration", "project_id", p.ID)
	}
	return nil
}

// replaceFieldName renames the field a message starts with.
func replaceFieldName(msg, from, to string) string {
	if rest, ok := strings.CutPrefix(msg, from); ok {
		return to + rest
	}
	return msg
}
