package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/discord/discordtest"
	"github.com/agentqueued/agentqueued/internal/llm/llmtest"
	"github.com/agentqueued/agentqueued/internal/repo/githubtest"
)

// doctorWorld is what one doctor case runs against: a repository, fake
// CLIs, GitHub, Discord and an LLM endpoint, each real over 127.0.0.1.
type doctorWorld struct {
	dir, repo, bin, data string
	github, discord, llm string
	env                  map[string]string
}

// normalize replaces what differs between runs (temporary paths,
// ports, free space) by fixed names.
func (w doctorWorld) normalize(s string) string {
	for _, r := range []struct{ from, to string }{
		{w.github, "GITHUB"}, {w.discord, "DISCORD"}, {w.llm, "LLM"},
		{w.repo, "REPO"}, {w.bin, "BIN"}, {w.data, "DATA"}, {w.dir, "DIR"},
	} {
		if r.from != "" {
			s = strings.ReplaceAll(s, r.from, r.to)
		}
	}
	s = regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(s, "127.0.0.1:PORT")
	return regexp.MustCompile(`\d+(\.\d)? [KMGTPE]?i?B free at \S+`).ReplaceAllString(s, "N GiB free at PATH")
}

// TestDoctor: doctor checks a configuration against the real clients'
// fakes and reports each check on one line, with the fix; any error
// makes it exit 1.
func TestDoctor(t *testing.T) {
	t.Parallel()
	gh := githubtest.New(githubtest.Options{Token: "ghp_good", Scopes: []string{"repo", "workflow"}})
	t.Cleanup(gh.Close)
	ghNarrow := githubtest.New(githubtest.Options{Token: "ghp_narrow", Login: "narrow", Scopes: []string{"read:org"}})
	t.Cleanup(ghNarrow.Close)
	dc := discordtest.New(discordtest.Options{Token: "bot-token", Clock: stillClock()})
	t.Cleanup(dc.Close)
	llm := llmtest.New(llmtest.Options{APIKey: "llm-key", Model: "small"})
	t.Cleanup(llm.Close)

	tests := []struct {
		name string
		// config is the configuration, with REPO, BIN, DATA, GITHUB,
		// DISCORD and LLM replaced by the world's.
		config string
		// daemon starts a daemon with the configuration before the check.
		daemon bool
		code   int
	}{
		{"healthy", `data_dir: DATA
listen: 127.0.0.1:1
projects:
  - id: web
    repo: {path: REPO}
agents:
  - {name: claude-1, type: claude, command: BIN/claude, pass_env: [ANTHROPIC_API_KEY]}
  - {name: worker, type: command, command: /bin/sh}
github: {token: ghp_good, api_base_url: GITHUB/api/v3/}
discord:
  token: bot-token
  guild_id: "` + discordtest.DefaultGuildID + `"
  control_channel_id: "` + discordtest.DefaultChannelID + `"
  admin_users: ["` + discordtest.DefaultUserID + `"]
  api_base_url: DISCORD
llm: {base_url: LLM, api_key: llm-key, model: small}
`, false, 0},
		{"broken", `data_dir: DATA
listen: 127.0.0.1:1
projects:
  - id: web
    repo: {path: DIR}
  - id: api
    repo: {url: "file://DIR/missing.git"}
agents:
  - {name: codex-1, type: codex}
  - {name: claude-1, type: claude, command: BIN/claude, pass_env: [ANTHROPIC_API_KEY]}
github: {token: ghp_narrow, api_base_url: NARROW/api/v3/}
discord:
  token: wrong-token
  guild_id: "` + discordtest.DefaultGuildID + `"
  control_channel_id: "` + discordtest.DefaultChannelID + `"
  api_base_url: DISCORD
llm: {base_url: LLM, api_key: wrong-key, model: small}
`, false, 1},
		{"bad config", "listen: nowhere\nagents:\n  - {name: w, type: command}\n", false, 1},
		{"running daemon", `data_dir: DATA
listen: 127.0.0.1:0
agents:
  - {name: worker, type: command, command: /bin/sh}
`, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := doctorWorld{dir: t.TempDir(), repo: userRepo(t), bin: t.TempDir(), github: gh.URL(), discord: dc.URL(),
				llm: llm.URL()}
			w.data = filepath.Join(w.dir, "data")
			fakeCLI(t, w.bin, "claude", "2.0.31 (Claude Code)")
			w.env = map[string]string{"PATH": w.bin, "HOME": w.dir} // only the fakes: the machine's own CLIs stay out
			doc := strings.NewReplacer("REPO", w.repo, "BIN", w.bin, "DATA", w.data, "GITHUB", gh.URL(),
				"NARROW", ghNarrow.URL(), "DISCORD", dc.URL(), "LLM", llm.URL(), "DIR", w.dir).Replace(tt.config)
			cfg := writeFile(t, w.dir, "aq.yaml", doc)
			args := []string{"doctor", "--config", cfg}
			if tt.daemon {
				d, err := startMain(t, w.env, "run", "--config", cfg)
				if err != nil {
					t.Fatal(err)
				}
				mustCtl(t, d.m.Addr(), "project", "create", "web", "--repo-path", w.repo)
				mustCtl(t, d.m.Addr(), "agent", "add", "api-1", "--type", "command", "--command", "/bin/true")
				// A hook with a prompt and no LLM to send it to is refused
				// when it is made (doctor still reports one an older
				// daemon kept).
				if code, _, errOut := runMain(t, w.env, "ctl", "--addr", d.m.Addr(), "hook", "create", "--file", writeFile(t, w.dir, "hook.json",
					`{"project_id": "web", "name": "summary", "trigger": {"type": "periodic", "interval_seconds": 3600}, "prompt_template": "Summarise"}`)); code == 0 ||
					!strings.Contains(errOut, "prompt_template") || !strings.Contains(errOut, "llm.model") {
					t.Fatalf("a hook with a prompt and no LLM: exit %d, stderr %s", code, errOut)
				}
				args = append(args, "--addr", d.m.Addr())
			}
			code, out, errOut := runMain(t, w.env, args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr %s", code, tt.code, errOut)
			}
			got := w.normalize(out)
			golden := filepath.Join("testdata", "doctor", strings.ReplaceAll(tt.name, " ", "-")+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("doctor output differs from %s:\n--- got\n%s--- want\n%s", golden, got, want)
			}
		})
	}
}

// TestDoctorTellsAnotherDaemon: a daemon of another configuration (its
// own data directory) answering at the address is not vouched for: doctor
// says it is not this configuration's and exits 1; the daemon of the
// configuration itself, and its database named by a path through a
// symbolic link, pass.
func TestDoctorTellsAnotherDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := map[string]string{"PATH": "/usr/bin:/bin", "HOME": dir}
	theirs := writeFile(t, dir, "theirs.yaml", "data_dir: "+filepath.Join(dir, "theirs")+"\nlisten: 127.0.0.1:0\n")
	d, err := startMain(t, env, "run", "--config", theirs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "theirs"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	addr := d.m.Addr()
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	tests := []struct {
		name, dataDir string
		code          int
		want          string
	}{
		{"another data dir", filepath.Join(dir, "mine"), 1, "error   daemon: the daemon answering at " + addr +
			" is not this configuration's: it serves another database (sha256:"},
		{"the same data dir", filepath.Join(dir, "theirs"), 0, "ok      daemon: running at " + addr},
		{"through a link", filepath.Join(dir, "link"), 0, "ok      daemon: running at " + addr},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := writeFile(t, t.TempDir(), "aq.yaml", "data_dir: "+tt.dataDir+"\nlisten: 127.0.0.1:1\n")
			code, out, _ := runMain(t, env, "doctor", "--config", cfg, "--addr", d.m.Addr())
			if code != tt.code || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, want %d; output lacks %q:\n%s", code, tt.code, tt.want, out)
			}
			if tt.code != 0 && !strings.Contains(out, "fix: stop that daemon") {
				t.Errorf("no fix given:\n%s", out)
			}
		})
	}
}
