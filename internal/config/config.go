package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Defaults of the configuration keys.
const (
	// DefaultListen is the default of listen: loopback only.
	DefaultListen = "127.0.0.1:7700"
	// DefaultLogLevel is the default of log.level.
	DefaultLogLevel = "info"
	// DefaultLogFormat is the default of log.format.
	DefaultLogFormat = "text"
	// DefaultLeaseTTL is the default of lease.ttl.
	DefaultLeaseTTL = 30 * time.Second
	// DefaultDatabaseFile is the file name of the database inside data_dir
	// when database.path is not set.
	DefaultDatabaseFile = "agentqueued.db"
	// AppDirName is the directory created under $XDG_DATA_HOME or
	// ~/.local/share for the default data_dir.
	AppDirName = "agentqueued"
	// FallbackDataDir is data_dir when neither $XDG_DATA_HOME nor $HOME is set.
	FallbackDataDir = "data"
	// MinLeaseTTL is the shortest lease.ttl accepted.
	MinLeaseTTL = time.Second
	// MaxFileBytes caps the size of a configuration file: a larger one is
	// refused before it is parsed.
	MaxFileBytes = 1 << 20
)

// LogLevels are the accepted values of log.level.
var LogLevels = []string{"debug", "info", "warn", "error"}

// LogFormats are the accepted values of log.format.
var LogFormats = []string{"text", "json"}

// Config is the daemon's configuration.
type Config struct {
	// DataDir holds the daemon's state; it is created when missing.
	DataDir string
	// Listen is the host:port the HTTP API listens on; port 0 picks a free port.
	Listen string
	// API configures the HTTP API.
	API APIConfig
	// Log configures logging.
	Log LogConfig
	// Database configures the SQLite database.
	Database DatabaseConfig
	// Lease configures the single-writer lease on the database.
	Lease LeaseConfig
	// Agents are registered (or their settings updated) at start.
	Agents []models.Agent
	// Projects are created at start when missing; a project that exists
	// is left as it is (its changes through the API are kept).
	Projects []models.Project
	// Orchestrator tunes scheduling and supervision; zero values take the
	// orchestrator's defaults.
	Orchestrator OrchestratorConfig
	// Rules are the scheduling rules in force.
	Rules []models.Rule
	// Profiles are the named agent profiles tasks and projects may choose.
	Profiles map[string]models.Profile
	// Verification configures the VERIFYING phase.
	Verification VerificationConfig
	// Plans configures plans agents leave as files.
	Plans PlansConfig
	// Discord configures the Discord bot; without a token the daemon runs
	// headless.
	Discord DiscordConfig
	// LLM configures the OpenAI-compatible model used for natural-language
	// requests in chat; without a model none is used.
	LLM LLMConfig
	// GitHub configures pull requests; without a token none are opened.
	GitHub GitHubConfig
	// Hooks tunes the hook engine; zero values take its defaults.
	Hooks HooksConfig
	// Workflows configures workflows.
	Workflows WorkflowsConfig
	// Metrics configures where the Prometheus metrics are served.
	Metrics MetricsConfig
	// Retention says how long history is kept and when finished tasks are
	// archived.
	Retention RetentionConfig
	// Desk configures the notifier of what waits on a person.
	Desk DeskConfig
}

// DeskConfig configures the desk's notifier (escalations and digests).
type DeskConfig struct {
	// PollInterval bounds the wait between two looks at the desk; zero
	// takes the notifier's default.
	PollInterval time.Duration
	// Webhooks are the URLs escalations may also be POSTed to, by the name
	// a project's escalate_webhook gives. A URL often holds a token: it is
	// one of the daemon's secrets, never shown and never given to agents.
	Webhooks map[string]string
}

// MetricsConfig configures the Prometheus metrics (GET /metrics).
type MetricsConfig struct {
	// Listen, when set, is a host:port of its own for /metrics, served
	// without the API's token; empty serves /metrics on the API's listener
	// with the API's authorisation.
	Listen string
	// AllowRemote lets Listen be an address other than a loopback one:
	// anybody who reaches it reads the metrics.
	AllowRemote bool
}

// WorkflowsConfig configures workflows.
type WorkflowsConfig struct {
	// Dir holds workflow files (*.yaml, *.yml) loaded at start; empty
	// loads none.
	Dir string
	// PollInterval is how often schedules are looked at; zero is the
	// engine's default.
	PollInterval time.Duration
}

// HooksConfig tunes the hook engine.
type HooksConfig struct {
	// MaxRunning caps the hook runs running at once.
	MaxRunning int
	// PollInterval is how often schedules and task events are looked at
	// when nothing wakes the engine.
	PollInterval time.Duration
	// HTTPAllowHosts are the hosts http_get steps may fetch ("*.example.com"
	// admits sub-domains); empty refuses every http_get.
	HTTPAllowHosts []string
	// CommandTimeout and HTTPTimeout bound run_command and http_get steps
	// that set no timeout of their own.
	CommandTimeout time.Duration
	HTTPTimeout    time.Duration
	// StepOutputCap caps each step's output, in bytes.
	StepOutputCap int
	// MaxToolRounds caps the LLM calls of one run; LLMAttempts is how many
	// times one call is tried on rate limits and server failures.
	MaxToolRounds int
	LLMAttempts   int
}

// GitHubConfig configures pull requests on GitHub.
type GitHubConfig struct {
	// Token authenticates the API and pushes; it never reaches agents,
	// logs or checkouts.
	Token string
	// APIBaseURL is GitHub Enterprise's API (https://host/api/v3/); empty is
	// github.com.
	APIBaseURL string
	// WebhookSecret, when set, enables POST /webhooks/github, whose
	// deliveries must be signed with it.
	WebhookSecret string
	// PollInterval is how often each open pull request is checked; zero is
	// the watcher's default.
	PollInterval time.Duration
}

// Enabled reports whether a GitHub token is configured.
func (g GitHubConfig) Enabled() bool { return g.Token != "" }

// DiscordConfig configures the Discord bot.
type DiscordConfig struct {
	Token            string
	GuildID          string
	ControlChannelID string
	// AuthorizedUsers may use the bot; AdminUsers may also run destructive
	// commands. Nobody else may act.
	AuthorizedUsers []string
	AdminUsers      []string
	// APIBaseURL is where Discord's REST API is reached; empty is Discord's own.
	APIBaseURL string
}

// Enabled reports whether a bot token is configured.
func (d DiscordConfig) Enabled() bool { return d.Token != "" }

// LLMConfig configures an OpenAI-compatible chat model.
type LLMConfig struct {
	BaseURL, APIKey, Model string
}

// VerificationConfig configures the VERIFYING phase.
type VerificationConfig struct {
	// QAAgent reviews QA_AGENT tasks of projects that name no reviewer;
	// QAProfile is the profile it reviews with.
	QAAgent, QAProfile string
	// CheckTimeout bounds each test command; zero is the orchestrator's default.
	CheckTimeout time.Duration
	// LandPollInterval is how often, while a landing waits for a LINK
	// repository's working tree, the tree is checked so that the landing
	// lands once it is clean; zero is the landing's default (2s).
	LandPollInterval time.Duration
}

// PlansConfig configures plan files.
type PlansConfig struct {
	// Paths are files, relative to a checkout, where a root task's agent
	// may leave a plan; DefaultPlanPaths when not set.
	Paths []string
}

// DefaultPlanPaths are the default plans.paths.
var DefaultPlanPaths = []string{".claude/plan.md", ".agentqueued/plan.md"}

// OrchestratorConfig tunes scheduling and supervision.
type OrchestratorConfig struct {
	SafetyTick, Window, IdleTimeout, MaxRuntime, StartTimeout time.Duration
	RetryBackoff, MaxBackoff, StopGrace, PauseDelay           time.Duration
	InputTimeout                                              time.Duration
	// PrepareTimeout bounds the preparation of a run's workspace (a first
	// clone included); StartTimeout counts from its end.
	PrepareTimeout time.Duration
	// RunnerLease is how long a run on a runner keeps its lease without
	// the runner's heartbeat; RunnerHeartbeat is how often runners renew
	// it (docs/runners.md). The heartbeat must be under a third of the
	// lease.
	RunnerLease, RunnerHeartbeat time.Duration
	// GlobalTokenBudget caps the tokens of all projects in the window; nil
	// is unlimited.
	GlobalTokenBudget *int64
}

// APIConfig configures the HTTP API.
type APIConfig struct {
	// Token, when not empty, is required as "Authorization: Bearer <token>"
	// on every /api/v1 request.
	Token string
	// AllowedHosts are the host names or IP addresses (without port) the
	// Host header of a request may name besides loopback hosts and the
	// listen address's host; the API refuses any other.
	AllowedHosts []string
	// TLSCert and TLSKey, both or neither, are the PEM files of the API's
	// certificate (its chain may follow it) and of its private key: with
	// them the daemon serves HTTPS on listen. They are read once, at
	// start (LoadCertificate).
	TLSCert, TLSKey string
}

// TLS reports whether the API is served over TLS (api.tls_cert and
// api.tls_key are set).
func (a APIConfig) TLS() bool { return a.TLSCert != "" && a.TLSKey != "" }

// LogConfig configures logging.
type LogConfig struct {
	// Level is one of LogLevels.
	Level string
	// Format is one of LogFormats.
	Format string
}

// DatabaseConfig configures the SQLite database.
type DatabaseConfig struct {
	// Path is the SQLite file; empty means DefaultDatabaseFile inside DataDir
	// (see Config.DatabasePath).
	Path string
}

// LeaseConfig configures the lease that keeps a second daemon off the
// same database.
type LeaseConfig struct {
	// TTL is how long the lease lasts without renewal; it is renewed every TTL/3.
	TTL time.Duration
}

// fileConfig is the file's shape. Every value is a string so that values
// can be expanded and checked with errors that name their key.
type fileConfig struct {
	DataDir      string                 `yaml:"data_dir"`
	Listen       string                 `yaml:"listen"`
	API          fileAPI                `yaml:"api"`
	Log          fileLog                `yaml:"log"`
	Database     fileDatabase           `yaml:"database"`
	Lease        fileLease              `yaml:"lease"`
	Agents       []fileAgent            `yaml:"agents"`
	Projects     []fileProject          `yaml:"projects"`
	Orchestrator fileOrchestrator       `yaml:"orchestrator"`
	Rules        []map[string]any       `yaml:"rules"`
	Profiles     map[string]fileProfile `yaml:"profiles"`
	Verification fileVerification       `yaml:"verification"`
	Plans        filePlans              `yaml:"plans"`
	Discord      fileDiscord            `yaml:"discord"`
	LLM          fileLLM                `yaml:"llm"`
	GitHub       fileGitHub             `yaml:"github"`
	Hooks        fileHooks              `yaml:"hooks"`
	Workflows    fileWorkflows          `yaml:"workflows"`
	Metrics      fileMetrics            `yaml:"metrics"`
	Retention    fileRetention          `yaml:"retention"`
	Desk         fileDesk               `yaml:"desk"`
}

type fileDesk struct {
	PollInterval string            `yaml:"poll_interval"`
	Webhooks     map[string]string `yaml:"webhooks"`
}

type fileMetrics struct {
	Listen      string `yaml:"listen"`
	AllowRemote string `yaml:"allow_remote"`
}

type fileWorkflows struct {
	Dir          string `yaml:"dir"`
	PollInterval string `yaml:"poll_interval"`
}

type fileHooks struct {
	MaxRunning     int      `yaml:"max_running"`
	PollInterval   string   `yaml:"poll_interval"`
	HTTPAllowHosts []string `yaml:"http_allow_hosts"`
	CommandTimeout string   `yaml:"command_timeout"`
	HTTPTimeout    string   `yaml:"http_timeout"`
	StepOutputCap  int      `yaml:"step_output_cap"`
	MaxToolRounds  int      `yaml:"max_tool_rounds"`
	LLMAttempts    int      `yaml:"llm_attempts"`
}

type fileGitHub struct {
	Token         string `yaml:"token"`
	APIBaseURL    string `yaml:"api_base_url"`
	WebhookSecret string `yaml:"webhook_secret"`
	PollInterval  string `yaml:"poll_interval"`
}

type fileDiscord struct {
	Token            string   `yaml:"token"`
	GuildID          string   `yaml:"guild_id"`
	ControlChannelID string   `yaml:"control_channel_id"`
	AuthorizedUsers  []string `yaml:"authorized_users"`
	AdminUsers       []string `yaml:"admin_users"`
	APIBaseURL       string   `yaml:"api_base_url"`
}

type fileLLM struct {
	BaseURL string `yaml:"base_url"`
	APIKey  string `yaml:"api_key"`
	Model   string `yaml:"model"`
}

type fileProfile struct {
	Model              string             `yaml:"model"`
	PermissionMode     string             `yaml:"permission_mode"`
	AllowedTools       []string           `yaml:"allowed_tools"`
	MCPServers         []models.MCPServer `yaml:"mcp_servers"`
	SystemPromptSuffix string             `yaml:"system_prompt_suffix"`
}

func (f fileProfile) profile() models.Profile {
	return models.Profile{Model: f.Model, PermissionMode: f.PermissionMode, AllowedTools: f.AllowedTools,
		MCPServers: f.MCPServers, SystemPromptSuffix: f.SystemPromptSuffix}
}

type fileVerification struct {
	QAAgent          string `yaml:"qa_agent"`
	QAProfile        string `yaml:"qa_profile"`
	CheckTimeout     string `yaml:"check_timeout"`
	LandPollInterval string `yaml:"land_poll_interval"`
}

type filePlans struct {
	Paths []string `yaml:"paths"`
}

type fileAgent struct {
	Name        string            `yaml:"name"`
	Type        string            `yaml:"type"`
	Command     string            `yaml:"command"`
	Args        []string          `yaml:"args"`
	Env         map[string]string `yaml:"env"`
	PassEnv     []string          `yaml:"pass_env"`
	MaxRuntime  string            `yaml:"max_runtime"`
	IdleTimeout string            `yaml:"idle_timeout"`
	// HeartbeatTimeout holds the agent to a report over the agent RPC at
	// least this often; empty: no heartbeat is required.
	HeartbeatTimeout string      `yaml:"heartbeat_timeout"`
	Projects         []string    `yaml:"projects"`
	Profile          fileProfile `yaml:"profile"`
}

type fileOrchestrator struct {
	SafetyTick        string `yaml:"safety_tick"`
	Window            string `yaml:"window"`
	IdleTimeout       string `yaml:"idle_timeout"`
	MaxRuntime        string `yaml:"max_runtime"`
	StartTimeout      string `yaml:"start_timeout"`
	PrepareTimeout    string `yaml:"prepare_timeout"`
	RunnerLease       string `yaml:"runner_lease"`
	RunnerHeartbeat   string `yaml:"runner_heartbeat"`
	RetryBackoff      string `yaml:"retry_backoff"`
	MaxBackoff        string `yaml:"max_backoff"`
	StopGrace         string `yaml:"stop_grace"`
	PauseDelay        string `yaml:"pause_delay"`
	InputTimeout      string `yaml:"input_timeout"`
	GlobalTokenBudget string `yaml:"global_token_budget"`
}

type fileAPI struct {
	Token        string   `yaml:"token"`
	AllowedHosts []string `yaml:"allowed_hosts"`
	TLSCert      string   `yaml:"tls_cert"`
	TLSKey       string   `yaml:"tls_key"`
}

type fileLog struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

type fileDatabase struct {
	Path string `yaml:"path"`
}

type fileLease struct {
	TTL string `yaml:"ttl"`
}

// Default returns the defaults, with data_dir derived from the process
// environment.
func Default() Config { return defaults(os.LookupEnv) }

func defaults(getenv func(string) (string, bool)) Config {
	return Config{
		DataDir: DefaultDataDir(getenv),
		Listen:  DefaultListen,
		Log:     LogConfig{Level: DefaultLogLevel, Format: DefaultLogFormat},
		Lease:   LeaseConfig{TTL: DefaultLeaseTTL},
		Plans:   PlansConfig{Paths: DefaultPlanPaths},

		Retention: DefaultRetention(),
	}
}

// DefaultDataDir returns $XDG_DATA_HOME/agentqueued, else
// $HOME/.local/share/agentqueued, else FallbackDataDir.
func DefaultDataDir(getenv func(string) (string, bool)) string {
	if v, ok := getenv("XDG_DATA_HOME"); ok && filepath.IsAbs(v) {
		return filepath.Join(v, AppDirName)
	}
	if v, ok := getenv("HOME"); ok && v != "" {
		return filepath.Join(v, ".local", "share", AppDirName)
	}
	return FallbackDataDir
}

// DatabasePath returns database.path, or DefaultDatabaseFile inside DataDir
// when it is not set.
func (c Config) DatabasePath() string {
	if c.Database.Path != "" {
		return c.Database.Path
	}
	return filepath.Join(c.DataDir, DefaultDatabaseFile)
}

// Load reads the YAML file at path, expands environment references in its
// values with getenv (os.LookupEnv when nil), lays it over the defaults and
// validates the result. An empty path yields the validated defaults.
func Load(path string, getenv func(string) (string, bool)) (Config, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	cfg := defaults(getenv)
	if path != "" {
		data, err := readFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("config: %w", err)
		}
		if err := cfg.parse(data, getenv); err != nil {
			return Config{}, fmt.Errorf("config: %s: %w", path, err)
		}
	}
	if err := cfg.AbsPaths(); err != nil {
		return Config{}, err
	}
	return cfg, cfg.Validate()
}

// AbsPaths makes every filesystem path of the configuration absolute,
// resolved against the working directory: data_dir, database.path,
// workflows.dir, api.tls_cert, api.tls_key and each project's repo.path. The daemon hands these to
// agents that run in other directories (AQ_SOCKET, the prompt file, the
// checkout), so a relative one would point elsewhere there. Load calls
// it; call it again after setting a path (from a flag). Empty paths stay
// empty; plans.paths are relative to a checkout and stay as they are.
func (c *Config) AbsPaths() error {
	abs := func(key string, p *string) error {
		if strings.TrimSpace(*p) == "" || filepath.IsAbs(*p) {
			return nil // Validate refuses an empty data_dir
		}
		a, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("config: %s: make %q absolute: %w", key, *p, err)
		}
		*p = a
		return nil
	}
	if err := abs("data_dir", &c.DataDir); err != nil {
		return err
	}
	if p := c.Database.Path; p != "." && !strings.HasSuffix(p, "/") { // a directory: Validate refuses it as written
		if err := abs("database.path", &c.Database.Path); err != nil {
			return err
		}
	}
	if err := abs("workflows.dir", &c.Workflows.Dir); err != nil {
		return err
	}
	if err := abs("api.tls_cert", &c.API.TLSCert); err != nil {
		return err
	}
	if err := abs("api.tls_key", &c.API.TLSKey); err != nil {
		return err
	}
	for i, p := range c.Projects {
		if p.Repo == nil || p.Repo.SourceType != models.RepoLink {
			continue
		}
		r := *p.Repo
		if err := abs(fmt.Sprintf("projects[%d].repo.path", i), &r.SourcePath); err != nil {
			return err
		}
		c.Projects[i].Repo = &r
	}
	return nil
}

// Parse lays the YAML document data over the defaults and validates the
// result, like Load without a file.
func Parse(data []byte, getenv func(string) (string, bool)) (Config, error) {
	if getenv == nil {
		getenv = os.LookupEnv
	}
	cfg := defaults(getenv)
	if len(data) > MaxFileBytes {
		return Config{}, fmt.Errorf("config: the document is %d bytes, larger than the %d bytes (%s) a configuration may be",
			len(data), MaxFileBytes, sizeName(MaxFileBytes))
	}
	if err := cfg.parse(data, getenv); err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	if err := cfg.AbsPaths(); err != nil {
		return Config{}, err
	}
	return cfg, cfg.Validate()
}

// readFile reads the configuration file at path, refusing one larger than
// MaxFileBytes without reading more of it.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%s: larger than the %d bytes (%s) a configuration file may be", path, MaxFileBytes,
			sizeName(MaxFileBytes))
	}
	return data, nil
}

// sizeName names a size of whole mebibytes or kibibytes.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func (c *Config) parse(data []byte, getenv func(string) (string, bool)) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return err
	}
	if len(root.Content) == 0 {
		return nil // empty document: defaults
	}

	// Shape check on the document as written: unknown keys and values of
	// the wrong kind are reported with their line.
	var raw fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&raw); err != nil {
		return describeDecodeError(err, &root)
	}

	refs := map[string][]string{}
	if err := expandNode(&root, "", getenv, refs); err != nil {
		return err
	}
	raw = fileConfig{}
	if err := root.Decode(&raw); err != nil {
		return describeDecodeError(err, &root)
	}
	if err := checkAgentSecrets(raw.Agents, refs); err != nil {
		return err
	}
	return c.overlay(raw)
}

// overlay sets every non-empty value of f.
func (c *Config) overlay(f fileConfig) error {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&c.DataDir, f.DataDir)
	set(&c.Listen, f.Listen)
	set(&c.API.Token, f.API.Token)
	set(&c.API.TLSCert, f.API.TLSCert)
	set(&c.API.TLSKey, f.API.TLSKey)
	if f.API.AllowedHosts != nil {
		c.API.AllowedHosts = f.API.AllowedHosts
	}
	set(&c.Log.Level, f.Log.Level)
	set(&c.Log.Format, f.Log.Format)
	set(&c.Database.Path, f.Database.Path)
	set(&c.Discord.Token, f.Discord.Token)
	set(&c.Discord.GuildID, f.Discord.GuildID)
	set(&c.Discord.ControlChannelID, f.Discord.ControlChannelID)
	set(&c.Discord.APIBaseURL, f.Discord.APIBaseURL)
	if f.Discord.AuthorizedUsers != nil {
		c.Discord.AuthorizedUsers = f.Discord.AuthorizedUsers
	}
	if f.Discord.AdminUsers != nil {
		c.Discord.AdminUsers = f.Discord.AdminUsers
	}
	set(&c.LLM.BaseURL, f.LLM.BaseURL)
	set(&c.LLM.APIKey, f.LLM.APIKey)
	set(&c.LLM.Model, f.LLM.Model)
	set(&c.GitHub.Token, f.GitHub.Token)
	set(&c.GitHub.APIBaseURL, f.GitHub.APIBaseURL)
	set(&c.GitHub.WebhookSecret, f.GitHub.WebhookSecret)
	if f.GitHub.PollInterval != "" {
		d, err := time.ParseDuration(f.GitHub.PollInterval)
		if err != nil {
			return fmt.Errorf("github.poll_interval: %q is not a duration", f.GitHub.PollInterval)
		}
		c.GitHub.PollInterval = d
	}
	for _, d := range []struct {
		key, v string
		to     *time.Duration
	}{{"hooks.poll_interval", f.Hooks.PollInterval, &c.Hooks.PollInterval},
		{"hooks.command_timeout", f.Hooks.CommandTimeout, &c.Hooks.CommandTimeout},
		{"hooks.http_timeout", f.Hooks.HTTPTimeout, &c.Hooks.HTTPTimeout}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil {
			return fmt.Errorf("%s: %q is not a duration (use e.g. 30s or 5m)", d.key, d.v)
		}
		*d.to = v
	}
	set(&c.Workflows.Dir, f.Workflows.Dir)
	if err := c.overlayRetention(f.Retention); err != nil {
		return err
	}
	if f.Desk.PollInterval != "" {
		d, err := time.ParseDuration(f.Desk.PollInterval)
		if err != nil || d <= 0 {
			return fmt.Errorf("desk.poll_interval: %q is not a positive duration (use e.g. 30s or 1m)", f.Desk.PollInterval)
		}
		c.Desk.PollInterval = d
	}
	for name, u := range f.Desk.Webhooks {
		if !models.ValidID(name) {
			return fmt.Errorf("desk.webhooks: %q is not a valid webhook name (letters, digits, - and _)", name)
		}
		if err := models.ValidateWebhookURL("desk.webhooks."+name, u); err != nil {
			return errors.New(models.ErrorMessageOf(err))
		}
		if c.Desk.Webhooks == nil {
			c.Desk.Webhooks = map[string]string{}
		}
		c.Desk.Webhooks[name] = u
	}
	set(&c.Metrics.Listen, f.Metrics.Listen)
	if f.Metrics.AllowRemote != "" {
		b, err := strconv.ParseBool(f.Metrics.AllowRemote)
		if err != nil {
			return fmt.Errorf("metrics.allow_remote: %q is not true or false", f.Metrics.AllowRemote)
		}
		c.Metrics.AllowRemote = b
	}
	if f.Workflows.PollInterval != "" {
		d, err := time.ParseDuration(f.Workflows.PollInterval)
		if err != nil {
			return fmt.Errorf("workflows.poll_interval: %q is not a duration (use e.g. 30s or 1m)", f.Workflows.PollInterval)
		}
		c.Workflows.PollInterval = d
	}
	c.Hooks.MaxRunning, c.Hooks.StepOutputCap = f.Hooks.MaxRunning, f.Hooks.StepOutputCap
	c.Hooks.MaxToolRounds, c.Hooks.LLMAttempts = f.Hooks.MaxToolRounds, f.Hooks.LLMAttempts
	if f.Hooks.HTTPAllowHosts != nil {
		c.Hooks.HTTPAllowHosts = f.Hooks.HTTPAllowHosts
	}
	if f.Lease.TTL != "" {
		d, err := time.ParseDuration(f.Lease.TTL)
		if err != nil {
			return fmt.Errorf("lease.ttl: %q is not a duration (use e.g. 30s or 1m)", f.Lease.TTL)
		}
		c.Lease.TTL = d
	}
	if err := c.overlayOrchestrator(f.Orchestrator); err != nil {
		return err
	}
	for i, fa := range f.Agents {
		a, err := fa.agent(fmt.Sprintf("agents[%d]", i))
		if err != nil {
			return err
		}
		c.Agents = append(c.Agents, a)
	}
	for i, fp := range f.Projects {
		p, err := fp.project(fmt.Sprintf("projects[%d]", i))
		if err != nil {
			return err
		}
		c.Projects = append(c.Projects, p)
	}
	for name, fp := range f.Profiles {
		if c.Profiles == nil {
			c.Profiles = map[string]models.Profile{}
		}
		c.Profiles[name] = fp.profile()
	}
	set(&c.Verification.QAAgent, f.Verification.QAAgent)
	set(&c.Verification.QAProfile, f.Verification.QAProfile)
	if err := parseDuration("verification.check_timeout", f.Verification.CheckTimeout, &c.Verification.CheckTimeout); err != nil {
		return err
	}
	if err := parseDuration("verification.land_poll_interval", f.Verification.LandPollInterval,
		&c.Verification.LandPollInterval); err != nil {
		return err
	}
	if f.Plans.Paths != nil {
		c.Plans.Paths = f.Plans.Paths
	}
	for i, raw := range f.Rules {
		b, err := json.Marshal(raw)
		if err != nil {
			return fmt.Errorf("rules[%d]: %w", i, err)
		}
		var r models.Rule
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("rules[%d]: %s", i, models.ErrorMessageOf(err))
		}
		c.Rules = append(c.Rules, r)
	}
	return nil
}

func parseDuration(key, v string, dst *time.Duration) error {
	if v == "" {
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return fmt.Errorf("%s: %q is not a positive duration (use e.g. 30s or 10m)", key, v)
	}
	*dst = d
	return nil
}

func (c *Config) overlayOrchestrator(f fileOrchestrator) error {
	o := &c.Orchestrator
	for _, d := range []struct {
		key, v string
		dst    *time.Duration
	}{
		{"orchestrator.safety_tick", f.SafetyTick, &o.SafetyTick}, {"orchestrator.window", f.Window, &o.Window},
		{"orchestrator.idle_timeout", f.IdleTimeout, &o.IdleTimeout}, {"orchestrator.max_runtime", f.MaxRuntime, &o.MaxRuntime},
		{"orchestrator.start_timeout", f.StartTimeout, &o.StartTimeout},
		{"orchestrator.prepare_timeout", f.PrepareTimeout, &o.PrepareTimeout},
		{"orchestrator.retry_backoff", f.RetryBackoff, &o.RetryBackoff}, {"orchestrator.max_backoff", f.MaxBackoff, &o.MaxBackoff},
		{"orchestrator.stop_grace", f.StopGrace, &o.StopGrace}, {"orchestrator.pause_delay", f.PauseDelay, &o.PauseDelay},
		{"orchestrator.input_timeout", f.InputTimeout, &o.InputTimeout},
		{"orchestrator.runner_lease", f.RunnerLease, &o.RunnerLease},
		{"orchestrator.runner_heartbeat", f.RunnerHeartbeat, &o.RunnerHeartbeat},
	} {
		if err := parseDuration(d.key, d.v, d.dst); err != nil {
			return err
		}
	}
	lease, beat := o.RunnerLease, o.RunnerHeartbeat
	if lease == 0 {
		lease = 60 * time.Second
	}
	if beat == 0 {
		beat = 10 * time.Second
	}
	if beat*3 > lease {
		return fmt.Errorf("orchestrator.runner_heartbeat: %s is more than a third of orchestrator.runner_lease (%s): "+
			"a lease would expire after two lost heartbeats", beat, lease)
	}
	if f.GlobalTokenBudget != "" {
		n, err := strconv.ParseInt(f.GlobalTokenBudget, 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("orchestrator.global_token_budget: %q is not a number of tokens", f.GlobalTokenBudget)
		}
		o.GlobalTokenBudget = &n
	}
	return nil
}

func (fa fileAgent) agent(key string) (models.Agent, error) {
	a := models.Agent{ID: fa.Name, Name: fa.Name, AgentType: fa.Type, AgentSettings: models.AgentSettings{
		Command: fa.Command, Args: fa.Args, Env: fa.Env, PassEnv: fa.PassEnv, Projects: fa.Projects, Profile: fa.Profile.profile()}}
	var maxRuntime, idle time.Duration
	if err := parseDuration(key+".max_runtime", fa.MaxRuntime, &maxRuntime); err != nil {
		return a, err
	}
	if err := parseDuration(key+".idle_timeout", fa.IdleTimeout, &idle); err != nil {
		return a, err
	}
	var heartbeat time.Duration
	if err := parseDuration(key+".heartbeat_timeout", fa.HeartbeatTimeout, &heartbeat); err != nil {
		return a, err
	}
	a.MaxRuntime, a.IdleTimeout = models.Duration(maxRuntime), models.Duration(idle)
	a.HeartbeatTimeout = models.Duration(heartbeat)
	return a, nil
}

// Validate checks every key, returning an error that names the first bad one.
func (c Config) Validate() error {
	if strings.TrimSpace(c.DataDir) == "" {
		return errors.New("config: data_dir: must not be empty")
	}
	if err := validateListen(c.Listen); err != nil {
		return fmt.Errorf("config: listen: %w", err)
	}
	if err := c.Metrics.validate(); err != nil {
		return err
	}
	if strings.ContainsAny(c.API.Token, " \t\r\n") {
		// The value is a secret: never repeat it.
		return errors.New("config: api.token: must not contain whitespace")
	}
	switch {
	case c.API.TLSCert != "" && c.API.TLSKey == "":
		return errors.New("config: api.tls_key: required when api.tls_cert is set (the PEM file of the certificate's private key)")
	case c.API.TLSKey != "" && c.API.TLSCert == "":
		return errors.New("config: api.tls_cert: required when api.tls_key is set (the PEM file of the certificate)")
	}
	for i, h := range c.API.AllowedHosts {
		if !validAllowedHost(h) {
			return fmt.Errorf("config: api.allowed_hosts[%d]: %q is not a host name or IP address "+
				"(no scheme, port or wildcard: e.g. agentqueued.lan or 192.168.1.20)", i, h)
		}
	}
	if !slices.Contains(LogLevels, c.Log.Level) {
		return fmt.Errorf("config: log.level: must be one of %s (got %q)", strings.Join(LogLevels, ", "), c.Log.Level)
	}
	if !slices.Contains(LogFormats, c.Log.Format) {
		return fmt.Errorf("config: log.format: must be one of %s (got %q)", strings.Join(LogFormats, ", "), c.Log.Format)
	}
	if p := c.Database.Path; p != "" && (strings.HasSuffix(p, "/") || p == ".") {
		return fmt.Errorf("config: database.path: %q is a directory, not a file", p)
	}
	if c.Lease.TTL < MinLeaseTTL {
		return fmt.Errorf("config: lease.ttl: must be at least %s (got %s)", MinLeaseTTL, c.Lease.TTL)
	}
	if err := c.Discord.validate(); err != nil {
		return err
	}
	if strings.ContainsAny(c.GitHub.Token, " \t\r\n") {
		return errors.New("config: github.token: must not contain whitespace")
	}
	if u := c.GitHub.APIBaseURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("config: github.api_base_url: %q is not an http(s) URL", u)
	}
	if err := c.Hooks.validate(); err != nil {
		return err
	}
	if c.Workflows.PollInterval != 0 && c.Workflows.PollInterval < time.Second {
		return fmt.Errorf("config: workflows.poll_interval: must be at least 1s (got %s)", c.Workflows.PollInterval)
	}
	if d := c.Workflows.Dir; d != "" {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return fmt.Errorf("config: workflows.dir: %q is not a directory", d)
		}
	}
	if c.GitHub.PollInterval != 0 && c.GitHub.PollInterval < time.Second {
		return fmt.Errorf("config: github.poll_interval: must be at least 1s (got %s)", c.GitHub.PollInterval)
	}
	if (c.LLM.BaseURL != "" || c.LLM.APIKey != "") && c.LLM.Model == "" {
		return errors.New("config: llm.model: required when llm.base_url or llm.api_key is set")
	}
	if u := c.LLM.BaseURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("config: llm.base_url: %q is not an http(s) URL", u)
	}
	seen := map[string]bool{}
	for i, a := range c.Agents {
		if a.ID == "" {
			return fmt.Errorf("config: agents[%d].name: required", i)
		}
		if seen[a.ID] {
			return fmt.Errorf("config: agents[%d].name: %q is listed twice", i, a.ID)
		}
		seen[a.ID] = true
		a.ApplyDefaults()
		if err := a.Validate(); err != nil {
			return fmt.Errorf("config: agents[%d] (%s): %s", i, a.ID, models.ErrorMessageOf(err))
		}
	}
	if err := validateProjects(c.Projects); err != nil {
		return err
	}
	if err := models.ValidateRules("rules", c.Rules); err != nil {
		return fmt.Errorf("config: %s", models.ErrorMessageOf(err))
	}
	names := make([]string, 0, len(c.Profiles))
	for name := range c.Profiles {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !models.ValidID(name) {
			return fmt.Errorf("config: profiles.%s: a profile name uses 1-64 lower-case letters, digits, '-' or '_'", name)
		}
		p := c.Profiles[name]
		if err := p.Validate(); err != nil {
			return fmt.Errorf("config: profiles.%s.%s", name, models.ErrorMessageOf(err))
		}
	}
	if err := c.checkProfileModes(); err != nil {
		return err
	}
	if q := c.Verification.QAAgent; q != "" && !models.ValidID(q) {
		return fmt.Errorf("config: verification.qa_agent: %q is not an agent name", q)
	}
	if q := c.Verification.QAProfile; q != "" {
		if _, ok := c.Profiles[q]; !ok {
			return fmt.Errorf("config: verification.qa_profile: no profile %q under profiles", q)
		}
	}
	for i, path := range c.Plans.Paths {
		if path == "" || filepath.IsAbs(path) || slices.Contains(strings.Split(filepath.ToSlash(path), "/"), "..") {
			return fmt.Errorf("config: plans.paths[%d]: %q must be a relative path inside the checkout", i, path)
		}
	}
	return nil
}

// secretKeys are the keys whose values are the daemon's own secrets.
var secretKeys = []string{"api.token", "discord.token", "github.token", "github.webhook_secret", "llm.api_key"}

// checkAgentSecrets refuses an agent of the file that would be given one
// of the daemon's own secrets: a pass_env name, or an env value referring
// to, a variable that a secret key's value refers to (pass_env:
// [GITHUB_TOKEN] beside github.token: ${GITHUB_TOKEN}). refs maps each
// key to the variables its value refers to.
func checkAgentSecrets(agents []fileAgent, refs map[string][]string) error {
	secret := map[string]string{}
	for _, key := range secretKeys {
		for _, name := range refs[key] {
			if _, ok := secret[name]; !ok {
				secret[name] = key
			}
		}
	}
	// A desk webhook's URL is a secret too (it often holds its token).
	for key, names := range refs {
		if strings.HasPrefix(key, "desk.webhooks.") {
			for _, name := range names {
				if _, ok := secret[name]; !ok {
					secret[name] = key
				}
			}
		}
	}
	if len(secret) == 0 {
		return nil
	}
	for i, fa := range agents {
		for j, name := range fa.PassEnv {
			if key, ok := secret[name]; ok {
				return fmt.Errorf("agents[%d].pass_env[%d]: %s holds %s, a secret of the daemon; agents never get "+
					"the daemon's own secrets (give the agent a variable of its own)", i, j, name, key)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(fa.Env)) {
			for _, name := range refs[fmt.Sprintf("agents[%d].env.%s", i, k)] {
				if key, ok := secret[name]; ok {
					return fmt.Errorf("agents[%d].env.%s: ${%s} holds %s, a secret of the daemon; agents never get "+
						"the daemon's own secrets (give the agent a variable of its own)", i, k, name, key)
				}
			}
		}
	}
	return nil
}

// validAllowedHost reports whether h is a DNS host name or an IP address.
func validAllowedHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	return models.ValidHostName(h)
}

// CheckServing checks that the API is not served beyond this machine
// unprotected: a listen address whose host is not loopback (localhost,
// 127.0.0.0/8, ::1) needs api.token, strong enough (MinRemoteTokenBits),
// and TLS (api.tls_cert and api.tls_key), without which every token
// would cross the network in the clear. Call it once the command line's
// --listen has been applied.
func (c *Config) CheckServing() error {
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("config: listen: %q is not host:port", c.Listen)
	}
	if models.IsLoopbackHost(host) {
		return nil
	}
	where := host
	if where == "" {
		where = "every interface"
	}
	const proxy = "or keep listen on 127.0.0.1 behind a TLS reverse proxy (docs/runners.md)"
	switch noToken, noTLS := c.API.Token == "", !c.API.TLS(); {
	case noToken && noTLS:
		return fmt.Errorf("config: listen: %s serves the API beyond this machine (%s) without api.token and without TLS: "+
			"anyone on the network could drive the daemon, and tokens would cross the network in the clear: "+
			"set api.token, and api.tls_cert and api.tls_key (a certificate and its key, PEM), "+proxy, c.Listen, where)
	case noToken:
		return fmt.Errorf("config: listen: %s serves the API beyond this machine (%s) and api.token is not set: "+
			"set api.token, or listen on 127.0.0.1", c.Listen, where)
	case noTLS:
		return fmt.Errorf("config: listen: %s serves the API beyond this machine (%s) without TLS: "+
			"its tokens (api.token, the dashboard's login, the runners' tokens) would cross the network in the clear: "+
			"set api.tls_cert and api.tls_key (a certificate and its key, PEM), "+proxy, c.Listen, where)
	}
	if bits := TokenBits(c.API.Token); bits < MinRemoteTokenBits {
		// The value is a secret: never repeat it.
		return fmt.Errorf("config: api.token: too weak to serve the API beyond this machine on %s "+
			"(about %d bits, at least %d needed: e.g. 32 hex or 22 base64 characters): "+
			"make one with `openssl rand -hex 32`, or listen on 127.0.0.1", c.Listen, bits, MinRemoteTokenBits)
	}
	return nil
}

// MinRemoteTokenBits is the least estimated strength of api.token, in
// bits, when the API listens beyond loopback.
const MinRemoteTokenBits = 128

// TokenBits estimates the strength of a random token in bits: its length
// times the bits of one character of the smallest alphabet it fits (hex
// digits of one case: 4; else the sum of the classes it uses: lower and
// upper letters 26 each, digits 10, other characters 33). A token of fewer
// than 8 distinct characters is not random: it counts as its distinct
// characters times 4 bits.
func TokenBits(tok string) int {
	distinct := map[rune]bool{}
	var lower, upper, digit, other bool
	n := 0
	for _, r := range tok {
		n++
		distinct[r] = true
		switch {
		case r >= 'a' && r <= 'z':
			lower = true
		case r >= 'A' && r <= 'Z':
			upper = true
		case r >= '0' && r <= '9':
			digit = true
		default:
			other = true
		}
	}
	if len(distinct) < 8 {
		return 4 * len(distinct)
	}
	hex := !other && (strings.Trim(strings.ToLower(tok), "0123456789abcdef") == "") && !(lower && upper)
	size := 16
	if !hex {
		size = 0
		for _, c := range []struct {
			used bool
			n    int
		}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 33}} {
			if c.used {
				size += c.n
			}
		}
	}
	return int(float64(n) * math.Log2(float64(size)))
}

// validate checks metrics.listen: a host:port, loopback unless
// metrics.allow_remote says otherwise.
func (m MetricsConfig) validate() error {
	if m.Listen == "" {
		return nil
	}
	if err := validateListen(m.Listen); err != nil {
		return fmt.Errorf("config: metrics.listen: %w", err)
	}
	host, _, _ := net.SplitHostPort(m.Listen)
	if !m.AllowRemote && !models.IsLoopbackHost(host) {
		where := host
		if where == "" {
			where = "every interface"
		}
		return fmt.Errorf("config: metrics.listen: %s serves the metrics beyond this machine (%s) without a token: "+
			"listen on 127.0.0.1, or set metrics.allow_remote: true", m.Listen, where)
	}
	return nil
}

func validateListen(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("%q: bad host %q", addr, host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q: port must be a number from 0 to 65535", addr)
	}
	return nil
}

// snowflake reports whether s looks like a Discord id.
func snowflake(s string) bool { return models.ValidSnowflake(s) }

func (d DiscordConfig) validate() error {
	if strings.ContainsAny(d.Token, " \t\r\n") {
		return errors.New("config: discord.token: must not contain whitespace")
	}
	if !d.Enabled() {
		return nil
	}
	for _, f := range []struct{ key, v string }{{"discord.guild_id", d.GuildID}, {"discord.control_channel_id", d.ControlChannelID}} {
		if f.v == "" {
			return fmt.Errorf("config: %s: required when discord.token is set", f.key)
		}
		if !snowflake(f.v) {
			return fmt.Errorf("config: %s: %q is not a Discord id (a number of 15 to 21 digits)", f.key, f.v)
		}
	}
	for _, l := range []struct {
		key string
		ids []string
	}{{"discord.authorized_users", d.AuthorizedUsers}, {"discord.admin_users", d.AdminUsers}} {
		for i, id := range l.ids {
			if !snowflake(id) {
				return fmt.Errorf("config: %s[%d]: %q is not a Discord user id", l.key, i, id)
			}
		}
	}
	if u := d.APIBaseURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("config: discord.api_base_url: %q is not an http(s) URL", u)
	}
	return nil
}

func (h HooksConfig) validate() error {
	for _, n := range []struct {
		key       string
		v, lo, hi int
	}{{"hooks.max_running", h.MaxRunning, 1, 100}, {"hooks.step_output_cap", h.StepOutputCap, 1024, 10 << 20},
		{"hooks.max_tool_rounds", h.MaxToolRounds, 1, 100}, {"hooks.llm_attempts", h.LLMAttempts, 1, 20}} {
		if n.v != 0 && (n.v < n.lo || n.v > n.hi) {
			return fmt.Errorf("config: %s: must be between %d and %d (got %d)", n.key, n.lo, n.hi, n.v)
		}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"hooks.poll_interval", h.PollInterval}, {"hooks.command_timeout", h.CommandTimeout}, {"hooks.http_timeout", h.HTTPTimeout}} {
		if d.v != 0 && d.v < time.Second {
			return fmt.Errorf("config: %s: must be at least 1s (got %s)", d.key, d.v)
		}
	}
	for i, host := range h.HTTPAllowHosts {
		bare := strings.TrimPrefix(host, "*.")
		if bare == "" || strings.ContainsAny(bare, "/:*@ \t") {
			return fmt.Errorf("config: hooks.http_allow_hosts[%d]: %q is not a host name (use e.g. ci.example.com or *.example.com)", i, host)
		}
	}
	return nil
}
