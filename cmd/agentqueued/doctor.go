package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/config"
	"github.com/agentqueued/agentqueued/internal/discord"
	"github.com/agentqueued/agentqueued/internal/llm"
	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
	"github.com/agentqueued/agentqueued/internal/service"
)

// Limits of doctor's checks.
const (
	// doctorRequestTimeout bounds each request to GitHub, Discord, the
	// LLM endpoint and the daemon.
	doctorRequestTimeout = 15 * time.Second
	// minFreeDisk is the free space below which doctor reports an error;
	// lowFreeDisk the one below which it warns.
	minFreeDisk = 100 << 20
	lowFreeDisk = 1 << 30
)

// checkStatus is the outcome of one check.
type checkStatus string

// The outcomes of checks.
const (
	checkOK      checkStatus = "ok"
	checkWarning checkStatus = "warning"
	checkError   checkStatus = "error"
)

// checkLine is one line of doctor's report.
type checkLine struct {
	status          checkStatus
	subject, detail string
	// fix says, in one line, what to do about a warning or an error.
	fix string
}

// doctor checks a configuration and the daemon it describes.
type doctor struct {
	m       *Main
	cfgPath string
	caFile  string // --ca-file
	cfg     config.Config
	lines   []checkLine
	// projects and hooks are the running daemon's, when it answers.
	projects []models.Project
	hooks    []models.Hook
	agents   []models.Agent
	running  bool
}

func (d *doctor) add(status checkStatus, subject, detail, fix string) {
	d.lines = append(d.lines, checkLine{status: status, subject: subject, detail: detail, fix: fix})
}

// print writes the report and a summary line; it returns the number of errors.
func (d *doctor) print(w io.Writer) int {
	counts := map[checkStatus]int{}
	for _, l := range d.lines {
		counts[l.status]++
		line := fmt.Sprintf("%-8s%s: %s", l.status, l.subject, l.detail)
		if l.fix != "" && l.status != checkOK {
			line += " — fix: " + l.fix
		}
		fmt.Fprintln(w, clean(line))
	}
	fmt.Fprintf(w, "\n%d ok, %d warnings, %d errors\n", counts[checkOK], counts[checkWarning], counts[checkError])
	return counts[checkError]
}

// runDoctor is the "doctor" subcommand.
func (m *Main) runDoctor(ctx context.Context, args []string) error {
	fs := newFlagSet("agentqueued doctor")
	cfgPath := fs.String("config", "", "configuration `file` to check (default: the built-in defaults)")
	addr := fs.String("addr", "", "the daemon's API `URL` (default $"+envAddr+" or the listen address of the configuration)")
	token := fs.String("token", "", "bearer `token` of the API (default $"+envToken+" or api.token)")
	caFile := fs.String("ca-file", "", "PEM `file` of certificate authorities trusted for the daemon's https certificate besides the system's (default $"+envCAFile+")")
	pos, err := parseFlags(fs, args, m.Stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("doctor: unexpected argument %q", pos[0])
	}
	d := &doctor{m: m, cfgPath: *cfgPath, caFile: *caFile}
	if d.checkConfig() {
		d.checkDaemon(ctx, *addr, *token)
		d.checkDataDir()
		d.checkAgents(ctx)
		d.checkProjects(ctx)
		d.checkGitHub(ctx)
		d.checkDiscord(ctx)
		d.checkLLM(ctx)
	}
	if n := d.print(m.Stdout); n > 0 {
		return fmt.Errorf("doctor: %d error(s): fix them and run doctor again", n)
	}
	return nil
}

func (d *doctor) checkConfig() bool {
	if d.cfgPath == "" {
		cfg, err := config.Load("", d.m.Getenv)
		if err != nil {
			d.add(checkError, "config", strings.TrimPrefix(err.Error(), "config: "), "set the environment it needs")
			return false
		}
		d.cfg = cfg
		d.add(checkWarning, "config", "no --config: the built-in defaults are checked",
			"agentqueued init writes a configuration for your repository")
		return true
	}
	cfg, err := config.Load(d.cfgPath, d.m.Getenv)
	if err != nil {
		d.add(checkError, "config", strings.TrimPrefix(err.Error(), "config: "), "correct the key it names")
		return false
	}
	if err := cfg.CheckServing(); err != nil {
		d.add(checkError, "config", strings.TrimPrefix(err.Error(), "config: "), "set what it names, or listen on 127.0.0.1")
		return false
	}
	d.cfg = cfg
	d.add(checkOK, "config", d.cfgPath+" loads", "")
	if cfg.API.TLS() {
		if pair, err := cfg.API.LoadCertificate(time.Now()); err != nil {
			d.add(checkError, "tls", strings.TrimPrefix(err.Error(), "config: "), "correct the file the key names")
		} else {
			d.add(checkOK, "tls", fmt.Sprintf("the API is served over https with %s, valid until %s", cfg.API.TLSCert,
				pair.Leaf.NotAfter.UTC().Format(time.DateOnly)), "")
		}
	}
	return true
}

func (d *doctor) checkDaemon(ctx context.Context, addr, token string) {
	if addr == "" {
		addr, _ = d.m.Getenv(envAddr)
	}
	trust, err := loadDaemonTrust(d.caFile, d.m.Getenv, &d.cfg)
	if err != nil {
		d.add(checkError, "daemon", err.Error(), "give a readable PEM file of the daemon's certificate authority")
		return
	}
	if addr == "" {
		addr = dialAddr(d.cfg.Listen, d.cfg.API.TLS())
	}
	if !strings.Contains(addr, "://") {
		addr = trust.scheme() + addr
	}
	if token == "" {
		token, _ = d.m.Getenv(envToken)
	}
	if token == "" {
		token = d.cfg.API.Token
	}
	tr, err := trust.transport()
	if err != nil {
		d.add(checkError, "daemon", err.Error(), "give a readable PEM file of the daemon's certificate authority")
		return
	}
	hc := &http.Client{Transport: tr, Timeout: doctorRequestTimeout}
	defer hc.CloseIdleConnections()
	client, err := api.NewClient(addr, token, hc)
	if err != nil {
		d.add(checkError, "daemon", err.Error(), "give --addr as http://host:port")
		return
	}
	start := "agentqueued run"
	if d.cfgPath != "" {
		start += " --config " + d.cfgPath
	}
	h, err := client.Health(ctx)
	if err != nil {
		var ue interface{ Timeout() bool }
		if models.ErrorCodeOf(err) == models.CodeUnauthorized {
			d.add(checkError, "daemon", fmt.Sprintf("%s refused the token: %s", addr, models.ErrorMessageOf(err)),
				"give the daemon's api.token (--token or $"+envToken+")")
			return
		}
		if api.CertificateError(err) {
			d.add(checkError, "daemon", fmt.Sprintf("the certificate of %s is not trusted: %v", addr, err),
				"give the authority that signed it with --ca-file")
			return
		}
		if errors.As(err, &ue) || strings.Contains(err.Error(), "connection refused") {
			d.add(checkWarning, "daemon", "not running at "+addr, "start it: "+start)
			return
		}
		d.add(checkWarning, "daemon", fmt.Sprintf("no answer at %s: %v", addr, err), "start it: "+start)
		return
	}
	if h.Status != "ok" {
		d.add(checkError, "daemon", fmt.Sprintf("running at %s, unhealthy: %s", addr, h.Reason), "see the daemon's log")
	}
	if !d.sameDatabase(addr, h.Database) {
		return
	}
	projects, err := client.ListProjects(ctx)
	if err != nil {
		d.add(checkError, "daemon", fmt.Sprintf("running at %s, but the projects cannot be listed: %s", addr, models.ErrorMessageOf(err)),
			"give the daemon's api.token (--token or $"+envToken+")")
		return
	}
	d.running = true
	d.projects = projects
	if hooks, err := client.ListHooks(ctx, ""); err == nil {
		d.hooks = hooks
	}
	if agents, err := client.ListAgents(ctx); err == nil {
		d.agents = agents
	}
	if h.Status == "ok" {
		d.add(checkOK, "daemon", fmt.Sprintf("running at %s (%d projects, %d hooks)", addr, len(projects), len(d.hooks)), "")
	}
}

// sameDatabase reports whether the daemon answering at addr serves this
// configuration's database, as its health answer's database id says; a
// daemon that serves another one (another data directory: another
// configuration, another project) is an error, and nothing more of it is
// checked. A daemon that does not say (an older agentqueued) is a warning.
func (d *doctor) sameDatabase(addr, got string) bool {
	want := databaseID(d.cfg.DatabasePath())
	switch got {
	case want:
		return true
	case "":
		d.add(checkWarning, "daemon", fmt.Sprintf("the daemon at %s does not say which database it serves (an older "+
			"agentqueued): it may not be the one of this configuration (%s)", addr, d.cfg.DatabasePath()),
			"upgrade and restart it, then run doctor again")
		return true
	}
	d.add(checkError, "daemon", fmt.Sprintf("the daemon answering at %s is not this configuration's: it serves another "+
		"database (%s), not %s (data dir %s)", addr, got, d.cfg.DatabasePath(), d.cfg.DataDir),
		"stop that daemon, or give this configuration a free listen: address (agentqueued init picks one), "+
			"or point --addr at this configuration's daemon")
	return false
}

func (d *doctor) checkDataDir() {
	dir := d.cfg.DataDir
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		d.add(checkOK, "data dir", dir+" does not exist yet: the daemon creates it (mode 0700)", "")
	case err != nil:
		d.add(checkError, "data dir", err.Error(), "make "+dir+" readable by the daemon's user")
	case !fi.IsDir():
		d.add(checkError, "data dir", dir+" is not a directory", "set data_dir to a directory")
	default:
		mode := fi.Mode().Perm()
		_, markErr := os.Stat(filepath.Join(dir, dataMarker))
		_, dbErr := os.Stat(d.cfg.DatabasePath())
		switch {
		case syscall.Access(dir, 0o2|0o1) != nil:
			d.add(checkError, "data dir", fmt.Sprintf("%s is not writable by this user", dir),
				"run the daemon as the directory's owner, or chown it")
		case markErr == nil && errors.Is(dbErr, os.ErrNotExist):
			d.add(checkError, "data dir", fmt.Sprintf("%s was used before but its database %s is missing", dir, d.cfg.DatabasePath()),
				"restore the database, or start once with --new-database")
		case mode&^dataDirMode != 0:
			d.add(checkWarning, "data dir", fmt.Sprintf("%s has mode %o: others may read the database and the agents' checkouts", dir, mode),
				fmt.Sprintf("chmod 700 %s (the daemon also does at start)", dir))
		case markErr == nil:
			d.add(checkOK, "data dir", fmt.Sprintf("%s (mode %o, in use)", dir, mode), "")
		default:
			d.add(checkOK, "data dir", fmt.Sprintf("%s (mode %o, not used yet)", dir, mode), "")
		}
	}
	d.checkDisk(dir)
}

func (d *doctor) checkDisk(dir string) {
	at := dir
	for {
		if _, err := os.Stat(at); err == nil {
			break
		}
		parent := filepath.Dir(at)
		if parent == at {
			break
		}
		at = parent
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(at, &st); err != nil {
		d.add(checkWarning, "disk", fmt.Sprintf("free space of %s unknown: %v", at, err), "")
		return
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	detail := fmt.Sprintf("%s free at %s", sizeOf(free), at)
	switch {
	case free < minFreeDisk:
		d.add(checkError, "disk", detail, "free space there: the daemon stops writing when the disk is full")
	case free < lowFreeDisk:
		d.add(checkWarning, "disk", detail, "free space there: checkouts and run logs need room")
	default:
		d.add(checkOK, "disk", detail, "")
	}
}

// sizeOf names a size in binary units, one decimal.
func sizeOf(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func (d *doctor) checkAgents(ctx context.Context) {
	agents := slices.Clone(d.cfg.Agents)
	inConfig := map[string]bool{}
	for _, a := range agents {
		inConfig[a.ID] = true
	}
	for _, a := range d.agents {
		if !inConfig[a.ID] {
			agents = append(agents, a)
		}
	}
	if len(agents) == 0 {
		d.add(checkWarning, "agents", "none in the configuration", "add one under agents: (see configs/agentqueued.example.yaml), "+
			"or register one with agentqueued ctl agent add")
		return
	}
	pathEnv, _ := d.m.Getenv("PATH")
	env := scrubbedEnv(d.m.Getenv)
	for i, a := range agents {
		subject := "agent " + a.ID
		name := service.AgentExecutable(a)
		key := fmt.Sprintf("agents[%d].command", i)
		if !inConfig[a.ID] {
			key = "its command (ctl agent remove " + a.ID + ", then ctl agent add with --command)"
		}
		if strings.Contains(name, "/") && !filepath.IsAbs(name) {
			d.add(checkOK, subject, name+" is relative to the checkout: checked when a run starts", "")
			continue
		}
		path, err := lookPathIn(name, pathEnv)
		if err != nil {
			fix := "install it, or set " + key + " to its absolute path"
			if filepath.IsAbs(name) {
				fix = "set " + key + " to an executable file"
			}
			d.add(checkError, subject, name+" is not on PATH or not executable", fix)
			continue
		}
		var missing []string
		for _, n := range a.PassEnv {
			if _, ok := d.m.Getenv(n); !ok {
				missing = append(missing, n)
			}
		}
		if a.AgentType == "command" {
			d.add(checkOK, subject, path, "")
		} else if v, err := programVersion(ctx, path, env, versionTimeout); err != nil {
			d.add(checkWarning, subject, err.Error(), "run "+path+" --version yourself to see why")
			continue
		} else {
			d.add(checkOK, subject, path+": "+v, "")
		}
		if len(missing) > 0 {
			d.add(checkWarning, subject, "pass_env names "+strings.Join(missing, ", ")+", not set here",
				"set it in the daemon's environment, or log the CLI in as the daemon's user")
		}
	}
}

func (d *doctor) checkProjects(ctx context.Context) {
	ws, err := repo.New(repo.Config{BaseDir: os.TempDir(), Credentials: d.credentials()})
	if err != nil {
		d.add(checkError, "projects", err.Error(), "")
		return
	}
	seen := map[string]bool{}
	var all []models.Project
	for _, p := range d.cfg.Projects {
		seen[p.ID] = true
		all = append(all, p)
	}
	for _, p := range d.projects {
		if !seen[p.ID] && p.Status != models.ProjectArchived {
			all = append(all, p)
		}
	}
	if len(all) == 0 {
		d.add(checkWarning, "projects", "none", "add one under projects: or with agentqueued ctl project create")
		return
	}
	for _, p := range all {
		subject := "project " + p.ID
		if p.Repo == nil {
			d.add(checkOK, subject, "no repository: agents work in a scratch directory", "")
			continue
		}
		if err := ws.CheckSource(ctx, *p.Repo, 0); err != nil {
			d.add(checkError, subject, models.ErrorMessageOf(err), "agentqueued ctl project edit "+p.ID+" --repo PATH|URL")
			continue
		}
		d.add(checkOK, subject, repoSummary(p.Repo)+" — "+repoKind(p.Repo), "")
	}
}

// credentials are the GitHub credentials clones use, for ls-remote.
func (d *doctor) credentials() func(string) (string, string, bool) {
	if !d.cfg.GitHub.Enabled() {
		return nil
	}
	hosts, err := repo.GitHubHosts(d.cfg.GitHub.APIBaseURL)
	if err != nil {
		return nil
	}
	return repo.TokenCredentials(d.cfg.GitHub.Token, strings.HasPrefix(d.cfg.GitHub.APIBaseURL, "http://"), hosts...)
}

// requiredGitHubScopes are the classic token scopes pull requests need.
var requiredGitHubScopes = []string{"repo"}

func (d *doctor) checkGitHub(ctx context.Context) {
	gc := d.cfg.GitHub
	if !gc.Enabled() {
		d.add(checkOK, "github", "not configured: tasks land without pull requests", "")
		return
	}
	hc := &http.Client{Timeout: doctorRequestTimeout}
	client := github.NewClient(hc).WithAuthToken(gc.Token)
	if gc.APIBaseURL != "" {
		base := gc.APIBaseURL
		if !strings.HasSuffix(base, "/") {
			base += "/"
		}
		var err error
		if client, err = client.WithEnterpriseURLs(base, base); err != nil {
			d.add(checkError, "github", "github.api_base_url: "+err.Error(), "set github.api_base_url to https://host/api/v3/")
			return
		}
	}
	user, resp, err := client.Users.Get(ctx, "")
	if err != nil {
		status := ""
		if resp != nil {
			status = resp.Status
		}
		if resp != nil && resp.StatusCode == http.StatusUnauthorized {
			d.add(checkError, "github", "github.token: GitHub refused it ("+status+")", "create a new token and set github.token")
			return
		}
		d.add(checkError, "github", "GitHub did not answer: "+models.RedactURL(err.Error()), "check github.api_base_url and the network")
		return
	}
	who := user.GetLogin()
	header, classic := resp.Header["X-Oauth-Scopes"]
	if !classic {
		d.add(checkOK, "github", "token of "+who+" (fine-grained: needs Contents and Pull requests read and write "+
			"on the projects' repositories)", "")
		return
	}
	var scopes []string
	for _, s := range strings.Split(strings.Join(header, ","), ",") {
		if s = strings.TrimSpace(s); s != "" {
			scopes = append(scopes, s)
		}
	}
	var lacking []string
	for _, s := range requiredGitHubScopes {
		if !slices.Contains(scopes, s) {
			lacking = append(lacking, s)
		}
	}
	list := strings.Join(scopes, ", ")
	if list == "" {
		list = "none"
	}
	if len(lacking) > 0 {
		d.add(checkError, "github", fmt.Sprintf("token of %s has scopes %s, not %s", who, list, strings.Join(lacking, ", ")),
			"create a token with the "+strings.Join(lacking, ", ")+" scope and set github.token")
		return
	}
	d.add(checkOK, "github", fmt.Sprintf("token of %s, scopes %s", who, list), "")
}

func (d *doctor) checkDiscord(ctx context.Context) {
	dc := d.cfg.Discord
	if !dc.Enabled() {
		d.add(checkOK, "discord", "not configured: the daemon runs headless", "")
		return
	}
	res, err := discord.Check(ctx, discord.Config{Token: dc.Token, GuildID: dc.GuildID, ControlChannelID: dc.ControlChannelID,
		APIBaseURL: dc.APIBaseURL, HTTPTimeout: doctorRequestTimeout})
	if err != nil {
		d.add(checkError, "discord", err.Error(), "correct the key it names (docs/discord.md)")
		return
	}
	detail := fmt.Sprintf("bot %s, control channel #%s in guild %s", res.BotName, res.ChannelName, dc.GuildID)
	if len(dc.AuthorizedUsers) == 0 && len(dc.AdminUsers) == 0 {
		d.add(checkWarning, "discord", detail+"; nobody may act", "list user ids in discord.authorized_users or discord.admin_users")
		return
	}
	d.add(checkOK, "discord", detail, "")
}

func (d *doctor) checkLLM(ctx context.Context) {
	lc := d.cfg.LLM
	var prompted []string
	for _, h := range d.hooks {
		if strings.TrimSpace(h.PromptTemplate) != "" && (h.LLMConfig == nil || h.LLMConfig.Model == "") && lc.Model == "" {
			prompted = append(prompted, h.ID)
		}
	}
	if len(prompted) > 0 {
		d.add(checkError, "llm", "hooks "+strings.Join(prompted, ", ")+" have a prompt and no model to send it to",
			"set llm.base_url and llm.model, or the hooks' llm_config")
	}
	if lc.Model == "" {
		if len(prompted) == 0 {
			d.add(checkOK, "llm", "not configured: hooks without a prompt and chat commands only", "")
		}
		return
	}
	client := llm.New(llm.Config{BaseURL: lc.BaseURL, APIKey: lc.APIKey, HTTPClient: &http.Client{Timeout: doctorRequestTimeout}})
	ids, err := client.ListModels(ctx)
	if err != nil {
		msg := models.RedactURL(err.Error())
		if status, _, ok := llm.APIError(err); ok && status == http.StatusUnauthorized {
			// The answer's message may quote part of the key: it is left out.
			d.add(checkError, "llm", fmt.Sprintf("llm.api_key: %s refused it (HTTP %d)", client.BaseURL(), status), "set llm.api_key")
			return
		}
		d.add(checkError, "llm", client.BaseURL()+" does not answer: "+msg, "start the model server, or correct llm.base_url")
		return
	}
	if slices.Contains(ids, lc.Model) {
		d.add(checkOK, "llm", fmt.Sprintf("%s serves %s", client.BaseURL(), lc.Model), "")
		return
	}
	d.add(checkWarning, "llm", fmt.Sprintf("%s answers but does not list %s", client.BaseURL(), lc.Model),
		"set llm.model to a model it serves (or pull it: ollama pull "+lc.Model+")")
}
