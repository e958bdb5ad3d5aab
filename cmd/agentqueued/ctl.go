package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/config"
	"github.com/agentqueued/agentqueued/internal/models"
)

// Environment variables read by ctl.
const (
	envAddr  = "AGENTQUEUED_ADDR"
	envToken = "AGENTQUEUED_TOKEN"
)

// defaultActor is recorded for events sent by ctl when $USER is not set.
const defaultActor = "ctl"

// ctlOptions are the flags every ctl command accepts.
type ctlOptions struct {
	addr       string
	token      string
	configPath string
	caFile     string
	json       bool
}

// register adds the options to fs, keeping values already parsed.
func (o *ctlOptions) register(fs *flag.FlagSet) {
	fs.StringVar(&o.addr, "addr", o.addr, "API `URL` (default $"+envAddr+", the listen address of --config, or http://"+config.DefaultListen+")")
	fs.StringVar(&o.token, "token", o.token, "bearer `token` (default $"+envToken+" or api.token of --config; prefer those: a flag is visible to other users in the process list)")
	fs.StringVar(&o.configPath, "config", o.configPath, "configuration `file` to take listen, api.token and api.tls_cert from")
	fs.StringVar(&o.caFile, "ca-file", o.caFile, "PEM `file` of certificate authorities trusted for the daemon's https certificate besides the system's (default $"+envCAFile+")")
	fs.BoolVar(&o.json, "json", o.json, "print JSON instead of tables")
}

// ctl is one invocation of a ctl command.
type ctl struct {
	m      *Main
	opts   ctlOptions
	out    io.Writer
	client *api.Client
}

type ctlHandler func(c *ctl, ctx context.Context, args []string) error

// ctlCommands maps "group verb" to its handler.
var ctlCommands = map[string]ctlHandler{
	"project create":    (*ctl).projectCreate,
	"project list":      (*ctl).projectList,
	"project show":      (*ctl).projectShow,
	"project edit":      (*ctl).projectEdit,
	"project archive":   (*ctl).projectArchive,
	"project delete":    (*ctl).projectDelete,
	"project land":      (*ctl).projectLand,
	"task add":          (*ctl).taskAdd,
	"task list":         (*ctl).taskList,
	"task show":         (*ctl).taskShow,
	"task edit":         (*ctl).taskEdit,
	"task deps":         (*ctl).taskDeps,
	"task delete":       (*ctl).taskDelete,
	"task skip":         eventCommand(models.EventAdminSkip),
	"task stop":         eventCommand(models.EventAdminStop),
	"task restart":      eventCommand(models.EventAdminRestart),
	"task cancel":       (*ctl).taskCancel,
	"task approve":      decisionCommand(true),
	"task reject":       decisionCommand(false),
	"task diff":         (*ctl).taskDiff,
	"task result":       (*ctl).taskResult,
	"task logs":         (*ctl).taskLogs,
	"agent add":         (*ctl).agentAdd,
	"agent list":        (*ctl).agentList,
	"agent show":        (*ctl).agentShow,
	"agent pause":       agentPauseCommand(true),
	"agent resume":      agentPauseCommand(false),
	"agent remove":      (*ctl).agentRemove,
	"runner add":        (*ctl).runnerAdd,
	"runner list":       (*ctl).runnerList,
	"runner show":       (*ctl).runnerShow,
	"runner drain":      runnerStateCommand(true),
	"runner resume":     runnerStateCommand(false),
	"runner remove":     (*ctl).runnerRemove,
	"question list":     (*ctl).questionList,
	"question answer":   (*ctl).questionAnswer,
	"hook list":         (*ctl).hookList,
	"hook show":         (*ctl).hookShow,
	"hook create":       (*ctl).hookCreate,
	"hook edit":         (*ctl).hookEdit,
	"hook enable":       hookEnableCommand(true),
	"hook disable":      hookEnableCommand(false),
	"hook delete":       (*ctl).hookDelete,
	"hook fire":         (*ctl).hookFire,
	"hook runs":         (*ctl).hookRuns,
	"hook run":          (*ctl).hookRun,
	"workflow list":     (*ctl).workflowList,
	"workflow show":     (*ctl).workflowShow,
	"workflow add":      (*ctl).workflowAdd,
	"workflow delete":   (*ctl).workflowDelete,
	"workflow run":      (*ctl).workflowRun,
	"workflow schedule": (*ctl).workflowSchedule,
	"run list":          (*ctl).runList,
	"run show":          (*ctl).runShow,
	"run tasks":         (*ctl).runTasks,
	"run cancel":        runActionCommand(false),
	"run retry":         runActionCommand(true),
	"run logs":          (*ctl).runLogs,
	"budget":            (*ctl).budget,
	"status":            (*ctl).status,
	"desk":              (*ctl).desk,
	"stats":             (*ctl).stats,
	"watch":             (*ctl).watch,
	"rule list":         (*ctl).ruleList,
	"rule set":          (*ctl).ruleSet,
	"health":            (*ctl).health,
}

// runCtl is the "ctl" subcommand.
func (m *Main) runCtl(ctx context.Context, args []string) error {
	c := &ctl{m: m, out: m.Stdout}
	fs := newFlagSet("agentqueued ctl")
	c.opts.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(m.Stdout, usage)
			return err
		}
		return usagef("ctl: %v", err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usagef("ctl: missing command")
	}
	key, rest := rest[0], rest[1:]
	if _, ok := ctlCommands[key]; !ok {
		if len(rest) == 0 {
			return usagef("ctl %s: missing or unknown command", key)
		}
		key, rest = key+" "+rest[0], rest[1:]
	}
	h, ok := ctlCommands[key]
	if !ok {
		return usagef("ctl: unknown command %q", key)
	}
	defer func() {
		if c.client != nil {
			c.client.CloseIdleConnections()
		}
	}()
	return h(c, ctx, rest)
}

// flagSet returns a flag set for a command with the common options.
func (c *ctl) flagSet(name string) *flag.FlagSet {
	fs := newFlagSet("agentqueued ctl " + name)
	c.opts.register(fs)
	return fs
}

// parse parses a command's arguments and checks the number of positional
// arguments, naming them in the usage error.
func (c *ctl) parse(fs *flag.FlagSet, args []string, positional ...string) ([]string, error) {
	pos, err := parseFlags(fs, args, c.out)
	if err != nil {
		return nil, err
	}
	if len(pos) != len(positional) {
		want := "no arguments"
		if len(positional) > 0 {
			want = strings.Join(positional, " ")
		}
		return nil, usagef("%s: want %s, got %d argument(s)", strings.TrimPrefix(fs.Name(), "agentqueued "), want, len(pos))
	}
	return pos, c.connect()
}

// connect builds the API client from the flags, environment and config.
func (c *ctl) connect() error {
	getenv := c.m.Getenv
	var cfg *config.Config
	if c.opts.configPath != "" {
		loaded, err := config.Load(c.opts.configPath, getenv)
		if err != nil {
			return &configError{err: err}
		}
		cfg = &loaded
	}
	trust, err := loadDaemonTrust(c.opts.caFile, getenv, cfg)
	if err != nil {
		return err
	}
	addr := c.opts.addr
	if addr == "" {
		addr, _ = getenv(envAddr)
	}
	if addr == "" && cfg != nil {
		addr = dialAddr(cfg.Listen, cfg.API.TLS())
	}
	if addr == "" {
		addr = config.DefaultListen
	}
	if !strings.Contains(addr, "://") {
		addr = trust.scheme() + addr
	}
	token := c.opts.token
	if token == "" {
		token, _ = getenv(envToken)
	}
	if token == "" && cfg != nil {
		token = cfg.API.Token
	}
	tr, err := trust.transport()
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: tr, Timeout: api.DefaultClientTimeout}
	client, err := api.NewClient(addr, token, hc)
	if err != nil {
		return usagef("--addr: %v", err)
	}
	c.client = client
	return nil
}

// dialAddr turns a listen address into one to connect to, https when
// the API is served over TLS.
func dialAddr(listen string, tls bool) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	scheme := "http://"
	if tls {
		scheme = "https://"
	}
	return scheme + net.JoinHostPort(host, port)
}

// visited returns the names of the flags set on the command line.
func visited(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// emit prints v as JSON with --json, else calls human. Either way the
// text is made safe for a terminal (jsonText, terminalText): whatever a
// printer forgot to clean cannot act on the terminal.
func (c *ctl) emit(v any, human func(w io.Writer)) error {
	if c.opts.json {
		data, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return fmt.Errorf("encode output: %w", err)
		}
		_, err = fmt.Fprintf(c.out, "%s\n", jsonText(data))
		return err
	}
	var b strings.Builder
	human(&b)
	_, err := io.WriteString(c.out, terminalText(b.String()))
	return err
}

// readStrict decodes a JSON file into v, refusing unknown fields and
// trailing data.
func readStrict(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: unexpected data after the JSON value", path)
	}
	return nil
}

// actorOf returns the --actor value, else who runs ctl (userName), else
// defaultActor.
func (c *ctl) actorOf(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if name := c.userName(); name != "" {
		return name
	}
	return defaultActor
}

// userName is who runs ctl: $USER, else the operating system's name of
// the account (a service or a container often sets no $USER); "" when
// neither is known.
func (c *ctl) userName() string {
	if name, _ := c.m.Getenv("USER"); name != "" {
		return name
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return ""
}

// listFlag collects comma-separated, repeatable values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

// repeatFlag collects repeatable values taken whole (commas included).
type repeatFlag []string

func (r *repeatFlag) String() string { return strings.Join(*r, " ") }

func (r *repeatFlag) Set(v string) error {
	*r = append(*r, v)
	return nil
}

// mapFlag collects repeatable key=value pairs.
type mapFlag map[string]string

func (m mapFlag) String() string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (m mapFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", v)
	}
	m[k] = val
	return nil
}

// itoa formats an optional integer, "-" when absent.
func itoa(p *int64) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatInt(*p, 10)
}
