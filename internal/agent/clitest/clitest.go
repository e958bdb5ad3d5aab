// Package clitest finds the real agent CLIs (Claude Code and Codex) for
// end-to-end tests and gives each test a private home for them, pointed at
// a fake model (internal/agent/modeltest).
//
// The CLIs are found in $AQ_TEST_CLI_DIR/node_modules/.bin when that
// variable is set, else on PATH. When one is missing the test is skipped
// with a message naming it and the install command; with CI=true it fails
// instead, so that CI never passes without running them. .ci/run installs
// the versions pinned in .ci/clis/package.json into a cache directory and
// sets AQ_TEST_CLI_DIR.
//
// Env returns the settings of one agent run: a private HOME and
// CODEX_HOME (no user configuration, login or history is read), the fake
// model's address, and the quiet start (no telemetry, no auto-update, no
// non-essential traffic). The CLIs keep their own retries of a failed
// model request, as a user's do. Keys, the variables Keys returns, are
// not settings: under the daemon they reach the agent as a user's do,
// through the agent's pass_env (PassEnv names them).
package clitest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// DirEnv names the variable holding the directory the CLIs are installed
// in (with npm install --prefix DIR): their binaries are in
// DIR/node_modules/.bin.
const DirEnv = "AQ_TEST_CLI_DIR"

// The CLIs, by the name of their binary.
const (
	Claude = "claude"
	Codex  = "codex"
)

// packages maps a CLI to its npm package.
var packages = map[string]string{Claude: "@anthropic-ai/claude-code", Codex: "@openai/codex"}

// CodexModel is the model the Codex config names: Codex offers apply_patch
// only to models it knows.
const CodexModel = "gpt-5.5"

// APIKey is the key both CLIs send to the fake model.
const APIKey = "modeltest-key"

// codexKeyEnv is the variable the Codex provider reads its key from: the
// one a user's Codex reads.
const codexKeyEnv = "OPENAI_API_KEY"

// claudeKeyEnv is the variable Claude Code reads its key from.
const claudeKeyEnv = "ANTHROPIC_API_KEY"

// Keys returns the variables holding the CLIs' keys to the fake model.
func Keys() map[string]string {
	return map[string]string{claudeKeyEnv: APIKey, codexKeyEnv: APIKey}
}

// PassEnv returns the names of the key variables the CLI named name
// reads: an agent's pass_env, as the documentation gives it.
func PassEnv(name string) []string {
	if name == Codex {
		return []string{codexKeyEnv}
	}
	return []string{claudeKeyEnv}
}

// Find returns the path of the CLI named name (Claude or Codex). A CLI
// that cannot be found skips the test, or fails it when CI=true or when
// AQ_TEST_CLI_DIR names a directory without it.
func Find(t testing.TB, name string) string {
	t.Helper()
	path, err := lookup(name)
	if err == nil {
		logVersion(t, name, path)
		return path
	}
	msg := fmt.Sprintf("%v; to run this test install the pinned CLIs — copy .ci/clis/package*.json into a directory DIR and run `npm ci` there "+
		"(or `npm install --prefix DIR %s`) — and set %s=DIR (docs/testing.md)", err, installArgs(), DirEnv)
	if os.Getenv("CI") == "true" || os.Getenv(DirEnv) != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// lookup finds name in AQ_TEST_CLI_DIR or on PATH.
func lookup(name string) (string, error) {
	if dir := os.Getenv(DirEnv); dir != "" {
		path := filepath.Join(dir, "node_modules", ".bin", name)
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("%s is not installed in %s=%s (%v)", name, DirEnv, dir, err)
		}
		return path, nil
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not on PATH and %s is not set", name, DirEnv)
	}
	if name == Codex {
		// Codex's npm launcher is a node script.
		if _, err := exec.LookPath("node"); err != nil {
			return "", fmt.Errorf("node is not on PATH (codex needs it)")
		}
	}
	return path, nil
}

var (
	versionsMu sync.Mutex
	versions   = map[string]string{}
)

// logVersion logs the CLI's version once per binary, and says so when it
// is not the pinned one.
func logVersion(t testing.TB, name, path string) {
	t.Helper()
	versionsMu.Lock()
	v, ok := versions[path]
	if !ok {
		out, err := exec.Command(path, "--version").Output()
		v = strings.TrimSpace(string(out))
		if err != nil {
			v = fmt.Sprintf("unknown (%v)", err)
		}
		versions[path] = v
	}
	versionsMu.Unlock()
	pinned := Pinned()[name]
	if pinned != "" && !strings.Contains(v, pinned) {
		t.Logf("%s at %s is version %q, not the pinned %s", name, path, v, pinned)
		return
	}
	t.Logf("%s: %s (%s)", name, path, v)
}

// Pinned returns the versions .ci/clis/package.json pins, by CLI name, or
// nothing when the file is not found above the working directory.
func Pinned() map[string]string {
	dir, _ := os.Getwd()
	for dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, ".ci", "clis", "package.json"))
		if err == nil {
			var pkg struct {
				Dependencies map[string]string `json:"dependencies"`
			}
			if json.Unmarshal(b, &pkg) != nil {
				return nil
			}
			out := map[string]string{}
			for name, p := range packages {
				out[name] = pkg.Dependencies[p]
			}
			return out
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return nil
}

// installArgs are the packages to install, pinned when the pins are found.
func installArgs() string {
	pins := Pinned()
	var out []string
	for _, name := range []string{Claude, Codex} {
		p := packages[name]
		if v := pins[name]; v != "" {
			p += "@" + v
		}
		out = append(out, p)
	}
	return strings.Join(out, " ")
}

// Options change the environment Env builds.
type Options struct {
	// CodexConfig is appended to the generated config.toml.
	CodexConfig string
}

// Env returns the environment of a CLI run against the fake model at
// modelURL (modeltest.Server.URL): a private home under a new temporary
// directory, and the settings both CLIs need. An agent's env in the
// daemon's configuration takes it as it is; the keys (Keys) go to the
// daemon's environment and the agent's pass_env.
func Env(t testing.TB, modelURL string, opts ...Options) map[string]string {
	t.Helper()
	o := Options{}
	if len(opts) > 0 {
		o = opts[0]
	}
	root := t.TempDir()
	home := filepath.Join(root, "home")
	codexHome := filepath.Join(root, "codex")
	for _, d := range []string{home, codexHome, filepath.Join(home, ".config"), filepath.Join(home, ".cache")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`# Written by clitest: Codex against the fake model.
model = %q
model_provider = "modeltest"

[model_providers.modeltest]
name = "modeltest"
base_url = %q
wire_api = "responses"
env_key = %q

[analytics]
enabled = false
`, CodexModel, strings.TrimSuffix(modelURL, "/")+"/v1", codexKeyEnv)
	if o.CodexConfig != "" {
		cfg += "\n" + o.CodexConfig + "\n"
	}
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"HOME":            home,
		"XDG_CONFIG_HOME": filepath.Join(home, ".config"),
		"XDG_CACHE_HOME":  filepath.Join(home, ".cache"),
		"CODEX_HOME":      codexHome,

		"ANTHROPIC_BASE_URL": modelURL,
		// The quiet start: nothing but the model requests leaves the CLI.
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"DISABLE_ERROR_REPORTING":                  "1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}
}
