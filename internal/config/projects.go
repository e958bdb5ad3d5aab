package config

import (
	"encoding/json"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/models"
)

// fileProject is a project of the file. Its repository is a local path
// (LINK) or a URL (CLONE).
type fileProject struct {
	ID                  string   `yaml:"id"`
	Name                string   `yaml:"name"`
	CreditWeight        float64  `yaml:"credit_weight"`
	MaxConcurrentAgents int      `yaml:"max_concurrent_agents"`
	Repo                fileRepo `yaml:"repo"`
	// Settings are the project's settings (models.ProjectSettings, by
	// their API names: test_commands, pr_mode, ...), as the API takes them.
	Settings map[string]any `yaml:"settings"`
}

type fileRepo struct {
	Path          string `yaml:"path"`
	URL           string `yaml:"url"`
	DefaultBranch string `yaml:"default_branch"`
	InPlace       bool   `yaml:"in_place"`
}

// project returns the project fp describes, defaults applied; key names
// it in errors ("projects[0]").
func (fp fileProject) project(key string) (models.Project, error) {
	p := models.Project{ID: fp.ID, Name: fp.Name, CreditWeight: fp.CreditWeight, MaxConcurrentAgents: fp.MaxConcurrentAgents}
	r := fp.Repo
	switch {
	case r.Path != "" && r.URL != "":
		return p, fmt.Errorf("%s.repo: give path (a local repository) or url (one to clone), not both", key)
	case r.Path != "":
		p.Repo = &models.RepoConfig{SourceType: models.RepoLink, SourcePath: r.Path, DefaultBranch: r.DefaultBranch, InPlace: r.InPlace}
	case r.URL != "":
		p.Repo = &models.RepoConfig{SourceType: models.RepoClone, URL: r.URL, DefaultBranch: r.DefaultBranch, InPlace: r.InPlace}
	case r.DefaultBranch != "" || r.InPlace:
		return p, fmt.Errorf("%s.repo: path or url is required", key)
	}
	if len(fp.Settings) > 0 {
		patch := models.SettingsPatch{}
		for k, v := range fp.Settings {
			raw, err := json.Marshal(v)
			if err != nil {
				return p, fmt.Errorf("%s.settings.%s: %v", key, k, err)
			}
			patch[k] = raw
		}
		settings, err := patch.Apply(models.ProjectSettings{})
		if err != nil {
			return p, fmt.Errorf("%s.%s", key, models.ErrorMessageOf(err))
		}
		p.Settings = settings
	}
	p.ApplyDefaults()
	return p, nil
}

// validateProjects checks the projects of the file, naming the first bad key.
func validateProjects(ps []models.Project) error {
	seen := map[string]bool{}
	for i, p := range ps {
		if p.ID == "" {
			return fmt.Errorf("config: projects[%d].id: required", i)
		}
		if seen[p.ID] {
			return fmt.Errorf("config: projects[%d].id: %q is listed twice", i, p.ID)
		}
		seen[p.ID] = true
		if err := p.Validate(); err != nil {
			msg := models.ErrorMessageOf(err)
			if p.Repo != nil && p.Repo.SourceType == models.RepoLink {
				msg = replaceField(msg, "repo.source_path", "repo.path")
			}
			return fmt.Errorf("config: projects[%d] (%s): %s", i, p.ID, msg)
		}
	}
	return nil
}

// replaceField renames a field of the API in a message to the file's key.
func replaceField(msg, from, to string) string {
	if len(msg) >= len(from) && msg[:len(from)] == from {
		return to + msg[len(from):]
	}
	return msg
}
