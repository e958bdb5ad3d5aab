package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// CreateProject validates p (after applying defaults) and stores it with its repo.
func (s *Store) CreateProject(ctx context.Context, p models.Project) (models.Project, error) {
	p.ApplyDefaults()
	if err := p.Validate(); err != nil {
		return models.Project{}, err
	}
	now := s.now().UTC()
	p.CreatedAt, p.UpdatedAt = now, now
	p.TotalTokensUsed = 0
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO projects (id, name, credit_weight, max_concurrent_agents, status,
			total_tokens_used, budget_limit, discord_channel_id, created_at, updated_at, settings) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
			p.ID, p.Name, p.CreditWeight, p.MaxConcurrentAgents, p.Status, 0, p.BudgetLimit,
			nullString(p.DiscordChannelID), toNanos(now), toNanos(now), encodeJSONColumn(p.Settings, "{}"))
		if isUniqueViolation(err) {
			return models.Errorf(models.CodeConflict, "project %q already exists", p.ID)
		}
		if err != nil {
			return err
		}
		if p.Repo != nil {
			return upsertRepo(ctx, tx, *p.Repo)
		}
		return nil
	})
	if err != nil {
		return models.Project{}, fmt.Errorf("create project %s: %w", p.ID, err)
	}
	return p, nil
}

func upsertRepo(ctx context.Context, tx *sql.Tx, r models.RepoConfig) error {
	var owner string
	err := tx.QueryRowContext(ctx, "SELECT project_id FROM repos WHERE id = ?", r.ID).Scan(&owner)
	if err == nil && owner != r.ProjectID {
		return models.Errorf(models.CodeConflict, "repo %q belongs to project %q", r.ID, owner)
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO repos (id, project_id, source_type, url, source_path, default_branch,
		checkout_base_path, in_place) VALUES (?,?,?,?,?,?,?,?)
		ON CONFLICT (id) DO UPDATE SET source_type = excluded.source_type, url = excluded.url,
		source_path = excluded.source_path, default_branch = excluded.default_branch,
		checkout_base_path = excluded.checkout_base_path, in_place = excluded.in_place`,
		r.ID, r.ProjectID, r.SourceType, r.URL, r.SourcePath, r.DefaultBranch, r.CheckoutBasePath, r.InPlace)
	return err
}

const projectColumns = `p.id, p.name, p.credit_weight, p.max_concurrent_agents, p.status, p.total_tokens_used,
	p.budget_limit, p.discord_channel_id, p.created_at, p.updated_at, p.settings,
	r.id, r.source_type, r.url, r.source_path, r.default_branch, r.checkout_base_path, r.in_place`

// projectFrom joins each project with its first repo.
const projectFrom = ` FROM projects p LEFT JOIN repos r ON r.rowid = (SELECT min(rowid) FROM repos WHERE project_id = p.id)`

func scanProject(row scanner) (models.Project, error) {
	var (
		p                       models.Project
		budget                  sql.NullInt64
		channel                 sql.NullString
		created, updated        int64
		rID, rType, rURL, rPath sql.NullString
		rBranch, rBase          sql.NullString
		rInPlace                sql.NullBool
		settings                string
	)
	if err := row.Scan(&p.ID, &p.Name, &p.CreditWeight, &p.MaxConcurrentAgents, &p.Status, &p.TotalTokensUsed,
		&budget, &channel, &created, &updated, &settings, &rID, &rType, &rURL, &rPath, &rBranch, &rBase, &rInPlace); err != nil {
		return models.Project{}, err
	}
	if budget.Valid {
		p.BudgetLimit = &budget.Int64
	}
	p.DiscordChannelID = fromNullString(channel)
	if err := decodeJSONColumn(settings, &p.Settings); err != nil {
		return models.Project{}, fmt.Errorf("project %s settings: %w", p.ID, err)
	}
	p.CreatedAt, p.UpdatedAt = fromNanos(created), fromNanos(updated)
	if rID.Valid {
		p.Repo = &models.RepoConfig{ID: rID.String, ProjectID: p.ID, SourceType: models.RepoSourceType(rType.String),
			URL: rURL.String, SourcePath: rPath.String, DefaultBranch: rBranch.String,
			CheckoutBasePath: rBase.String, InPlace: rInPlace.Bool}
	}
	return p, nil
}

// GetProject returns one project.
func (s *Store) GetProject(ctx context.Context, id string) (models.Project, error) {
	p, err := scanProject(s.rdb.QueryRowContext(ctx, "SELECT "+projectColumns+projectFrom+" WHERE p.id = +?", id)) // +?: see planStable
	if errors.Is(err, sql.ErrNoRows) {
		return models.Project{}, notFound("project", id)
	}
	if err != nil {
		return models.Project{}, fmt.Errorf("get project %s: %w", id, err)
	}
	return p, nil
}

// ListProjects returns every project, ordered by id.
func (s *Store) ListProjects(ctx context.Context) ([]models.Project, error) {
	rows, err := s.rdb.QueryContext(ctx, "SELECT "+projectColumns+projectFrom+" ORDER BY p.id")
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	defer rows.Close()
	out := []models.Project{}
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, fmt.Errorf("list projects: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// UpdateProject applies patch to a project, validating the result.
func (s *Store) UpdateProject(ctx context.Context, id string, patch models.ProjectPatch) (models.Project, error) {
	var out models.Project
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		cur, err := scanProject(tx.QueryRowContext(ctx, "SELECT "+projectColumns+projectFrom+" WHERE p.id = +?", id)) // +?: see planStable
		if errors.Is(err, sql.ErrNoRows) {
			return notFound("project", id)
		}
		if err != nil {
			return err
		}
		next, err := patch.Apply(cur)
		if err != nil {
			return err
		}
		next.UpdatedAt = s.now().UTC()
		if _, err := tx.ExecContext(ctx, `UPDATE projects SET name = ?, credit_weight = ?, max_concurrent_agents = ?,
			status = ?, budget_limit = ?, discord_channel_id = ?, updated_at = ?, settings = ? WHERE id = ?`,
			next.Name, next.CreditWeight, next.MaxConcurrentAgents, next.Status, next.BudgetLimit,
			nullString(next.DiscordChannelID), toNanos(next.UpdatedAt), encodeJSONColumn(next.Settings, "{}"), id); err != nil {
			return err
		}
		if patch.Repo != nil {
			if err := upsertRepo(ctx, tx, *next.Repo); err != nil {
				return err
			}
		}
		out = next
		return nil
	})
	if err != nil {
		return models.Project{}, fmt.Errorf("update project %s: %w", id, err)
	}
	if patch.Status != nil {
		s.changed()
	}
	return out, nil
}
