package clitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestLookup(t *testing.T) {
	installed := t.TempDir()
	bin := filepath.Join(installed, "node_modules", ".bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, Claude), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	tests := []struct {
		name, dir, path, cli string
		want, err            string
	}{
		{"in the directory", installed, "", Claude, filepath.Join(bin, Claude), ""},
		{"missing in the directory", installed, "", Codex, "", "codex is not installed in " + DirEnv + "=" + installed},
		{"not on PATH", "", empty, Claude, "", "claude is not on PATH and " + DirEnv + " is not set"},
		{"on PATH", "", bin, Claude, filepath.Join(bin, Claude), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(DirEnv, tc.dir)
			if tc.path != "" {
				t.Setenv("PATH", tc.path)
			}
			got, err := lookup(tc.cli)
			if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
				t.Errorf("lookup(%s) = %q, %v; want %q, %q", tc.cli, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestPinnedVersionsAndInstallCommand(t *testing.T) {
	t.Parallel()
	pins := Pinned()
	if pins[Claude] == "" || pins[Codex] == "" {
		t.Fatalf("Pinned() = %v, want both CLIs from .ci/clis/package.json", pins)
	}
	want := "@anthropic-ai/claude-code@" + pins[Claude] + " @openai/codex@" + pins[Codex]
	if got := installArgs(); got != want {
		t.Errorf("installArgs() = %q, want %q", got, want)
	}
}

// TestPinsAreKnownGood: the CLI versions CI runs are the tested versions
// the daemon knows of, and none is older than the known-good version of
// its type (so CI never runs a version the daemon warns about, nor the
// daemon's table a version CI never ran).
func TestPinsAreKnownGood(t *testing.T) {
	t.Parallel()
	pins := Pinned()
	for _, cli := range []string{Claude, Codex} {
		pin := pins[cli]
		if tested := models.TestedCLIVersion(cli); pin != tested {
			t.Errorf("%s is pinned at %q in .ci/clis/package.json, the daemon's table says %q is tested", cli, pin, tested)
		}
		if w := models.CLIVersionWarning(cli, pin); w != "" {
			t.Errorf("the pinned %s %s gets the daemon's warning: %s", cli, pin, w)
		}
	}
}

func TestEnvIsPrivateAndPointsAtTheModel(t *testing.T) {
	t.Parallel()
	env := Env(t, "http://127.0.0.1:1234/", Options{CodexConfig: "[features]\nx = true"})
	for _, k := range []string{"HOME", "CODEX_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"} {
		if st, err := os.Stat(env[k]); err != nil || !st.IsDir() || !strings.HasPrefix(env[k], os.TempDir()) {
			t.Errorf("%s = %q (%v): want a new private directory", k, env[k], err)
		}
	}
	if env["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:1234/" || env["DISABLE_TELEMETRY"] != "1" {
		t.Errorf("env = %v", env)
	}
	// Keys are not settings (they go through pass_env), and the CLIs keep
	// their retries.
	for _, k := range []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CLAUDE_CODE_MAX_RETRIES"} {
		if v, ok := env[k]; ok {
			t.Errorf("env sets %s=%q", k, v)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(env["CODEX_HOME"], "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`base_url = "http://127.0.0.1:1234/v1"`, `wire_api = "responses"`, `model = "` + CodexModel + `"`,
		`env_key = "OPENAI_API_KEY"`, "[features]\nx = true"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config.toml lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(string(cfg), "max_retries") {
		t.Errorf("config.toml changes Codex's retries:\n%s", cfg)
	}
	for _, cli := range []string{Claude, Codex} {
		for _, k := range PassEnv(cli) {
			if Keys()[k] != APIKey {
				t.Errorf("%s's pass_env names %s, which Keys() does not set", cli, k)
			}
		}
	}
}

// TestFindSkipsOrFails runs TestFindHelper in a child test binary with no
// CLI to be found: it skips, except in CI, where it fails.
func TestFindSkipsOrFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ci, want string
	}{
		{"", "--- SKIP: TestFindHelper"},
		{"true", "--- FAIL: TestFindHelper"},
	}
	for _, tc := range tests {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFindHelper$", "-test.v")
		cmd.Env = []string{"CLITEST_HELPER=1", "PATH=" + t.TempDir(), "CI=" + tc.ci}
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), "claude is not on PATH") ||
			!strings.Contains(string(out), "npm install --prefix DIR @anthropic-ai/claude-code@") {
			t.Errorf("CI=%q: want %q and the install command:\n%s", tc.ci, tc.want, out)
		}
	}
}

// TestFindHelper is run by TestFindSkipsOrFails.
func TestFindHelper(t *testing.T) {
	if os.Getenv("CLITEST_HELPER") == "" {
		t.Skip("run by TestFindSkipsOrFails")
	}
	Find(t, Claude)
	t.Error("Find returned without the CLI")
}
