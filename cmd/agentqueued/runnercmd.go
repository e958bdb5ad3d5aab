package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentqueued/agentqueued/internal/config"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/runner"
)

// runRunner is `agentqueued runner`: the process on another machine that
// holds agents and connects out to the daemon (docs/runners.md).
func (m *Main) runRunner(ctx context.Context, args []string) error {
	fs := newFlagSet("agentqueued runner")
	server := fs.String("server", "", "the daemon's `URL` (https://HOST:PORT)")
	tokenFile := fs.String("token-file", "", "`file` holding the runner's token (ctl runner add prints it)")
	caFile := fs.String("ca-file", "", "PEM `file` of certificate authorities trusted for the daemon's certificate besides the system's")
	name := fs.String("name", "", "the runner's `name`, checked against the one its token names")
	cfgPath := fs.String("config", "", "configuration `file` whose agents: the runner holds (the daemon's own shape)")
	dataDir := fs.String("data-dir", "", "`directory` of the runner's checkouts and runs (default: the configuration's data_dir/runner)")
	pos, err := parseFlags(fs, args, m.Stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("runner: unexpected argument %q", pos[0])
	}
	switch {
	case *server == "":
		return usagef("runner: --server is required")
	case *tokenFile == "":
		return usagef("runner: --token-file is required")
	}
	u, err := url.Parse(*server)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return usagef("runner: --server %q: want the daemon's URL, https://HOST:PORT", *server)
	}
	token, err := readTokenFile(*tokenFile)
	if err != nil {
		return &configError{err: err}
	}
	var ca []byte
	if *caFile != "" {
		if ca, err = readCAFile("--ca-file", *caFile); err != nil {
			return err
		}
	}
	cfg, err := config.Load(*cfgPath, m.Getenv)
	if err != nil {
		return &configError{err: err}
	}
	agents := make([]models.RunnerAgent, 0, len(cfg.Agents))
	for _, a := range cfg.Agents {
		agents = append(agents, models.RunnerAgent{Name: a.ID, AgentType: a.AgentType, MaxRuntime: a.MaxRuntime,
			IdleTimeout: a.IdleTimeout, HeartbeatTimeout: a.HeartbeatTimeout, Projects: a.Projects, Profile: a.Profile})
	}
	log := newLogger(cfg.Log, m.Stderr).With("component", "runner")
	dir := *dataDir
	if dir == "" {
		dir = filepath.Join(cfg.DataDir, "runner")
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return usagef("runner: --data-dir: %v", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return &configError{err: fmt.Errorf("--data-dir: %w", err)}
	}
	self, _ := os.Executable()
	r, err := runner.New(runner.Config{Server: u, Token: token, CABundle: ca, Name: *name, Version: readVersion().module(),
		Agents: agents, AgentConfigs: cfg.Agents, DataDir: dir, Executable: self, Environ: m.Environ, Logger: log})
	if err != nil {
		return &configError{err: err}
	}
	if err := r.Run(ctx); err != nil {
		return fmt.Errorf("runner: %w", err)
	}
	return nil
}

// readTokenFile reads a token from the first line of path, which must not
// be readable by others than its owner.
func readTokenFile(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("--token-file %s: readable by others (mode %04o): chmod 600 it", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	token, _, _ := strings.Cut(string(data), "\n")
	token = strings.TrimSpace(token)
	if token == "" {
		return "", fmt.Errorf("--token-file %s: empty", path)
	}
	return token, nil
}
