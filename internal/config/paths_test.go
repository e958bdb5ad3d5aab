package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentqueued/agentqueued/internal/config"
)

// TestLoadMakesPathsAbsolute: every filesystem path of the configuration
// (data_dir, database.path, workflows.dir, api.tls_cert, api.tls_key, a
// project's repo.path, and the
// data_dir fallback) is absolute after Load and Parse, resolved against the
// working directory; absolute ones and plans.paths (relative to a checkout)
// stay as written. Not parallel: it changes the working directory.
func TestLoadMakesPathsAbsolute(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	if real, err := os.Getwd(); err == nil {
		wd = real
	}
	const doc = "data_dir: state\n" +
		"database:\n  path: db/aq.db\n" +
		"workflows:\n  dir: ./flows\n" +
		"api:\n  tls_cert: tls/cert.pem\n  tls_key: /etc/aq/key.pem\n" +
		"plans:\n  paths: [notes/plan.md]\n" +
		"projects:\n  - id: web\n    repo: {path: ../src/web}\n  - id: abs\n    repo: {path: /srv/abs}\n"
	if err := os.Mkdir("flows", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("agentqueued.yaml", []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := env(nil)
	loaded, err := config.Load("agentqueued.yaml", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := config.Parse([]byte(doc), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	fallback, err := config.Load("", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, got, want string }{
		{"data_dir", loaded.DataDir, filepath.Join(wd, "state")},
		{"database.path", loaded.Database.Path, filepath.Join(wd, "db", "aq.db")},
		{"DatabasePath", loaded.DatabasePath(), filepath.Join(wd, "db", "aq.db")},
		{"workflows.dir", loaded.Workflows.Dir, filepath.Join(wd, "flows")},
		{"api.tls_cert", loaded.API.TLSCert, filepath.Join(wd, "tls", "cert.pem")},
		{"api.tls_key (absolute)", loaded.API.TLSKey, "/etc/aq/key.pem"},
		{"Parse api.tls_cert", parsed.API.TLSCert, filepath.Join(wd, "tls", "cert.pem")},
		{"projects[0].repo.path", loaded.Projects[0].Repo.SourcePath, filepath.Join(filepath.Dir(wd), "src", "web")},
		{"projects[1].repo.path (absolute)", loaded.Projects[1].Repo.SourcePath, "/srv/abs"},
		{"plans.paths (relative to a checkout)", loaded.Plans.Paths[0], "notes/plan.md"},
		{"Parse data_dir", parsed.DataDir, filepath.Join(wd, "state")},
		{"Parse workflows.dir", parsed.Workflows.Dir, filepath.Join(wd, "flows")},
		{"fallback data_dir", fallback.DataDir, filepath.Join(wd, config.FallbackDataDir)},
		{"fallback DatabasePath", fallback.DatabasePath(), filepath.Join(wd, config.FallbackDataDir, config.DefaultDatabaseFile)},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}

	// A path set after Load (the daemon's --data-dir) is made absolute by
	// AbsPaths; one Validate refuses as a directory is left to it.
	cfg := fallback
	cfg.DataDir, cfg.Database.Path = "other", "."
	if err := cfg.AbsPaths(); err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != filepath.Join(wd, "other") {
		t.Errorf("AbsPaths: data_dir = %q", cfg.DataDir)
	}
	if err := cfg.Validate(); err == nil {
		t.Errorf("database.path %q passed Validate after AbsPaths", cfg.Database.Path)
	}
}
