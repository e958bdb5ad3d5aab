package config_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/config"
)

// env returns a getenv over the given variables.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

// writeFile writes content to a file in a fresh temporary directory.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agentqueued.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load("", env(map[string]string{"HOME": "/home/u"}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := config.Config{
		DataDir: "/home/u/.local/share/agentqueued",
		Listen:  config.DefaultListen,
		Log:     config.LogConfig{Level: config.DefaultLogLevel, Format: config.DefaultLogFormat},
		Lease:   config.LeaseConfig{TTL: config.DefaultLeaseTTL},
		Plans:   config.PlansConfig{Paths: config.DefaultPlanPaths},

		Retention: config.DefaultRetention(),
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("defaults = %+v, want %+v", cfg, want)
	}
	if got := cfg.DatabasePath(); got != "/home/u/.local/share/agentqueued/agentqueued.db" {
		t.Errorf("DatabasePath = %q", got)
	}
	if err := config.Default().Validate(); err != nil {
		t.Errorf("Default().Validate: %v", err)
	}
}

func TestDefaultDataDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"xdg", map[string]string{"XDG_DATA_HOME": "/xdg", "HOME": "/home/u"}, "/xdg/agentqueued"},
		{"relative xdg is ignored", map[string]string{"XDG_DATA_HOME": "rel", "HOME": "/home/u"}, "/home/u/.local/share/agentqueued"},
		{"home", map[string]string{"HOME": "/home/u"}, "/home/u/.local/share/agentqueued"},
		{"nothing", nil, config.FallbackDataDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := config.DefaultDataDir(env(tt.env)); got != tt.want {
				t.Errorf("DefaultDataDir = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLoadValidFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `
# every key
data_dir: /srv/aq
listen: 0.0.0.0:8080
api:
  token: ${AQ_TOKEN}
log:
  level: debug
  format: json
database:
  path: /srv/db/aq.sqlite
lease:
  ttl: 1m30s
`)
	cfg, err := config.Load(path, env(map[string]string{"AQ_TOKEN": "s3cret"}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := config.Config{
		DataDir:  "/srv/aq",
		Listen:   "0.0.0.0:8080",
		API:      config.APIConfig{Token: "s3cret"},
		Log:      config.LogConfig{Level: "debug", Format: "json"},
		Database: config.DatabaseConfig{Path: "/srv/db/aq.sqlite"},
		Lease:    config.LeaseConfig{TTL: 90 * time.Second},
		Plans:    config.PlansConfig{Paths: config.DefaultPlanPaths},

		Retention: config.DefaultRetention(),
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("Load = %+v, want %+v", cfg, want)
	}
	if got := cfg.DatabasePath(); got != "/srv/db/aq.sqlite" {
		t.Errorf("DatabasePath = %q", got)
	}
}

func TestLoadPartialFileKeepsDefaults(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "data_dir: /d\nlog:\n  level: warn\n")
	cfg, err := config.Load(path, env(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Listen != config.DefaultListen || cfg.Log.Format != config.DefaultLogFormat ||
		cfg.Lease.TTL != config.DefaultLeaseTTL || cfg.Log.Level != "warn" {
		t.Errorf("Load = %+v", cfg)
	}
	if got := cfg.DatabasePath(); got != filepath.Join("/d", config.DefaultDatabaseFile) {
		t.Errorf("DatabasePath = %q", got)
	}
}

func TestLoadExampleFile(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(filepath.Join("..", "..", "configs", "agentqueued.example.yaml"),
		env(map[string]string{"HOME": "/home/u"}))
	if err != nil {
		t.Fatalf("Load example: %v", err)
	}
	if cfg.Listen != config.DefaultListen {
		t.Errorf("example listen = %q", cfg.Listen)
	}
}

func TestLoadErrorsNameTheKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content string
		env     map[string]string
		want    string // substring of the error
	}{
		{"listen not host:port", "listen: abc\n", nil, `config: listen: "abc" is not host:port`},
		{"listen bad port", "listen: 127.0.0.1:http\n", nil, `config: listen: "127.0.0.1:http": port must be a number`},
		{"listen port too big", "listen: :70000\n", nil, `config: listen:`},
		{"log.level", "log:\n  level: loud\n", nil, `config: log.level: must be one of debug, info, warn, error`},
		{"log.format", "log:\n  format: xml\n", nil, `config: log.format: must be one of text, json`},
		{"lease.ttl not a duration", "lease:\n  ttl: soon\n", nil, `lease.ttl: "soon" is not a duration`},
		{"lease.ttl bare number", "lease:\n  ttl: 30\n", nil, `lease.ttl: "30" is not a duration`},
		{"lease.ttl too short", "lease:\n  ttl: 10ms\n", nil, `config: lease.ttl: must be at least 1s`},
		{"database.path directory", "database:\n  path: /var/lib/\n", nil, `config: database.path:`},
		{"api.token whitespace", "api:\n  token: \"a b\"\n", nil, `config: api.token: must not contain whitespace`},
		{"unknown top-level key", "listen: 127.0.0.1:1\nlisten_addr: x\n", nil, `line 2: unknown key "listen_addr"`},
		{"unknown nested key", "log:\n  level: info\n  levle: debug\n", nil, `line 3: unknown key "log.levle"`},
		{"section given a value", "log: debug\n", nil, `line 1: log: expected a mapping of keys`},
		{"value given a list", "listen:\n  - a\n", nil, `line 2: listen: expected a single value, got a list`},
		{"not a mapping", "- listen\n", nil, `(top level): expected a mapping of keys`},
		{"syntax error", "listen: [\n", nil, `yaml: line 1`},
		{"missing env var", "api:\n  token: ${AQ_TOKEN}\n", nil, `line 2: api.token: environment variable AQ_TOKEN is not set`},
		{"bad env name", "data_dir: ${1X}\n", nil, `line 1: data_dir: ${1X}: "1X" is not an environment variable name`},
		{"unterminated reference", "data_dir: ${HOME\n", map[string]string{"HOME": "/h"}, `line 1: data_dir: unterminated ${`},
		{"discord without guild", "discord:\n  token: t\n  control_channel_id: \"123456789012345678\"\n", nil,
			`config: discord.guild_id: required when discord.token is set`},
		{"discord bad channel", "discord:\n  token: t\n  guild_id: \"123456789012345678\"\n  control_channel_id: general\n", nil,
			`config: discord.control_channel_id: "general" is not a Discord id`},
		{"discord bad user", "discord:\n  token: t\n  guild_id: \"123456789012345678\"\n  control_channel_id: \"123456789012345679\"\n  admin_users: [\"123456789012345670\", bob]\n", nil,
			`config: discord.admin_users[1]: "bob" is not a Discord user id`},
		{"discord bad base url", "discord:\n  token: t\n  guild_id: \"123456789012345678\"\n  control_channel_id: \"123456789012345679\"\n  api_base_url: discord.example\n", nil,
			`config: discord.api_base_url: "discord.example" is not an http(s) URL`},
		{"discord unknown key", "discord:\n  tokn: t\n", nil, `line 2: unknown key "discord.tokn"`},
		{"github bad base url", "github:\n  token: t\n  api_base_url: ghe.example\n", nil, `config: github.api_base_url: "ghe.example" is not an http(s) URL`},
		{"github poll interval", "github:\n  poll_interval: 10ms\n", nil, `config: github.poll_interval: must be at least 1s`},
		{"github poll interval not a duration", "github:\n  poll_interval: often\n", nil, `github.poll_interval: "often" is not a duration`},
		{"hooks cap", "hooks:\n  max_running: 0\n  llm_attempts: 50\n", nil, `config: hooks.llm_attempts: must be between 1 and 20 (got 50)`},
		{"hooks poll interval", "hooks:\n  poll_interval: 1ms\n", nil, `config: hooks.poll_interval: must be at least 1s (got 1ms)`},
		{"hooks command timeout not a duration", "hooks:\n  command_timeout: long\n", nil, `hooks.command_timeout: "long" is not a duration`},
		{"hooks allow list", "hooks:\n  http_allow_hosts: [ci.example.com, \"http://x\"]\n", nil,
			`config: hooks.http_allow_hosts[1]: "http://x" is not a host name`},
		{"hooks unknown key", "hooks:\n  max_runing: 2\n", nil, `max_runing`},
		{"llm without model", "llm:\n  base_url: http://127.0.0.1:11434/v1\n", nil, `config: llm.model: required`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tt.content)
			_, err := config.Load(path, env(tt.env))
			if err == nil {
				t.Fatalf("Load(%q) succeeded, want error containing %q", tt.content, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load(%q) error = %q, want it to contain %q", tt.content, err, tt.want)
			}
		})
	}
}

func TestDiscordAndLLM(t *testing.T) {
	t.Parallel()
	path := writeFile(t, `
discord:
  token: ${DISCORD_TOKEN}
  guild_id: "123456789012345678"
  control_channel_id: "223456789012345678"
  authorized_users: ["323456789012345678"]
  admin_users: ["423456789012345678"]
llm:
  base_url: http://127.0.0.1:11434/v1
  model: llama3
`)
	cfg, err := config.Load(path, env(map[string]string{"DISCORD_TOKEN": "abc.def"}))
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.Discord
	if !d.Enabled() || d.Token != "abc.def" || d.GuildID != "123456789012345678" || d.ControlChannelID != "223456789012345678" ||
		len(d.AuthorizedUsers) != 1 || d.AdminUsers[0] != "423456789012345678" || d.APIBaseURL != "" {
		t.Errorf("discord: %+v", d)
	}
	if cfg.LLM.Model != "llama3" || cfg.LLM.BaseURL != "http://127.0.0.1:11434/v1" {
		t.Errorf("llm: %+v", cfg.LLM)
	}
	// Without a token Discord is off and nothing else is required.
	cfg, err = config.Parse([]byte("discord:\n  guild_id: x\n"), env(nil))
	if err != nil || cfg.Discord.Enabled() {
		t.Errorf("no token: %+v, %v", cfg.Discord, err)
	}
}

func TestSecretsStayOutOfErrors(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "api:\n  token: ${T}\n")
	_, err := config.Load(path, env(map[string]string{"T": "top secret"}))
	if err == nil {
		t.Fatal("Load succeeded, want whitespace error")
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q repeats the token", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := config.Load(filepath.Join(t.TempDir(), "nope.yaml"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("Load of a missing file: err = %v, want one naming the file", err)
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	vars := env(map[string]string{"A": "alpha", "EMPTY": ""})
	tests := []struct {
		in, want string
		wantErr  string
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "alpha"},
		{in: "x-${A}-y", want: "x-alpha-y"},
		{in: "${A}${A}", want: "alphaalpha"},
		{in: "${B:-beta}", want: "beta"},
		{in: "${A:-beta}", want: "alpha"},
		{in: "${EMPTY:-dflt}", want: "dflt"},
		{in: "${EMPTY}", want: ""},
		{in: "${B:-}", want: ""},
		{in: "${B:-a:b}", want: "a:b"},
		{in: "$$A", want: "$A"},
		{in: "cost $5", want: "cost $5"},
		{in: "end$", want: "end$"},
		{in: "${B}", wantErr: "environment variable B is not set"},
		{in: "${A", wantErr: "unterminated"},
		{in: "${}", wantErr: "not an environment variable name"},
	}
	for _, tt := range tests {
		got, err := config.Expand(tt.in, vars)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Expand(%q) = %q, %v; want error containing %q", tt.in, got, err, tt.wantErr)
			}
		case err != nil || got != tt.want:
			t.Errorf("Expand(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestExpansionDoesNotTouchKeysOrComments(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "# ${UNSET} in a comment is fine\nlisten: ${ADDR:-127.0.0.1:9000} # ${UNSET}\n")
	cfg, err := config.Load(path, env(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.Listen != "127.0.0.1:9000" {
		t.Errorf("listen = %q, want the default of the reference", cfg.Listen)
	}
}

func TestExpandedValuesStayStrings(t *testing.T) {
	t.Parallel()
	// A value that looks like YAML after expansion is not parsed again.
	path := writeFile(t, "api:\n  token: ${T}\n")
	cfg, err := config.Load(path, env(map[string]string{"T": "[1,2]"}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.API.Token != "[1,2]" {
		t.Errorf("token = %q", cfg.API.Token)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	valid := config.Config{DataDir: "/d", Listen: "127.0.0.1:0", Log: config.LogConfig{Level: "info", Format: "text"}, Lease: config.LeaseConfig{TTL: time.Second}}
	if err := valid.Validate(); err != nil {
		t.Fatalf("Validate(valid) = %v", err)
	}
	tests := []struct {
		name   string
		mutate func(*config.Config)
		want   string
	}{
		{"data_dir", func(c *config.Config) { c.DataDir = " " }, "config: data_dir:"},
		{"listen", func(c *config.Config) { c.Listen = "" }, "config: listen:"},
		{"log.level", func(c *config.Config) { c.Log.Level = "INFO" }, "config: log.level:"},
		{"log.format", func(c *config.Config) { c.Log.Format = "" }, "config: log.format:"},
		{"lease.ttl", func(c *config.Config) { c.Lease.TTL = 0 }, "config: lease.ttl:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := valid
			tt.mutate(&c)
			err := c.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want prefix %q", err, tt.want)
			}
		})
	}
}

func TestProfilesVerificationAndPlans(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
profiles:
  careful:
    model: opus
    permission_mode: acceptEdits
    allowed_tools: [Edit, "Bash(go test:*)"]
    system_prompt_suffix: Run the tests before you finish.
    mcp_servers:
      - name: docs
        url: https://docs.example.com/mcp
verification:
  qa_agent: reviewer
  qa_profile: careful
  check_timeout: 5m
  land_poll_interval: 10s
plans:
  paths: [PLAN.md]
agents:
  - name: claude-1
    type: claude
    profile:
      model: sonnet
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Profiles["careful"]
	if p.Model != "opus" || p.PermissionMode != "acceptEdits" || len(p.AllowedTools) != 2 || p.MCPServers[0].URL != "https://docs.example.com/mcp" {
		t.Fatalf("profile %+v", p)
	}
	if cfg.Verification.QAAgent != "reviewer" || cfg.Verification.CheckTimeout != 5*time.Minute ||
		cfg.Verification.LandPollInterval != 10*time.Second || cfg.Plans.Paths[0] != "PLAN.md" {
		t.Fatalf("verification %+v plans %+v", cfg.Verification, cfg.Plans)
	}
	if cfg.Agents[0].Profile.Model != "sonnet" {
		t.Fatalf("agent profile %+v", cfg.Agents[0].Profile)
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"bad profile name", "profiles:\n  Bad Name:\n    model: x\n", "profiles.Bad Name"},
		{"mcp server without command or url", "profiles:\n  p:\n    mcp_servers:\n      - name: x\n", "profiles.p.mcp_servers[0]"},
		{"unknown qa profile", "verification:\n  qa_profile: nope\n", "verification.qa_profile"},
		{"plan path outside", "plans:\n  paths: [../x.md]\n", "plans.paths[0]"},
		{"bad check timeout", "verification:\n  check_timeout: soon\n", "verification.check_timeout"},
		{"bad land poll interval", "verification:\n  land_poll_interval: 0s\n", "verification.land_poll_interval"},
		{"unknown profile key", "profiles:\n  p:\n    modle: x\n", "modle"},
	} {
		if _, err := config.Parse([]byte(tc.doc), nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}
