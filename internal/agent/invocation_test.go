package agent_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/agent"
	"github.com/agentqueued/agentqueued/internal/models"
)

// ownServer is agentqueued's own MCP server as the orchestrator hands it
// to a run.
var ownServer = models.MCPServer{Name: "agentqueued", Command: "/usr/local/bin/agentqueued", Args: []string{"mcp"},
	Env: map[string]string{"AQ_RUN_TOKEN": "t"}}

// flagValues returns the values that follow flag in argv up to the next
// flag (claude's variadic flags).
func flagValues(argv []string, flag string) []string {
	i := slices.Index(argv, flag)
	if i < 0 {
		return nil
	}
	var out []string
	for _, a := range argv[i+1:] {
		if strings.HasPrefix(a, "-") {
			break
		}
		out = append(out, a)
	}
	return out
}

// TestClaudeAllowsAgentqueuedTools checks --allowedTools: in print mode
// Claude denies every tool it does not name, agentqueued's own MCP tools
// and the shell fallback included.
func TestClaudeAllowsAgentqueuedTools(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		rc   agent.RunContext
		want []string
	}{
		{"own server, no profile tools", agent.RunContext{StateDir: "/s", MCPServers: []models.MCPServer{ownServer}},
			[]string{"mcp__agentqueued"}},
		{"own server and the shell", agent.RunContext{StateDir: "/s", MCPServers: []models.MCPServer{ownServer},
			Executable: "/usr/local/bin/agentqueued", Profile: models.Profile{PermissionMode: "acceptEdits", AllowedTools: []string{"Edit"}}},
			[]string{"Edit", "mcp__agentqueued", "Bash(/usr/local/bin/agentqueued agent:*)"}},
		{"a path a shell must quote", agent.RunContext{Executable: "/opt/agent queued/aq"},
			[]string{"Bash('/opt/agent queued/aq' agent:*)"}},
		{"plan mode runs no commands", agent.RunContext{StateDir: "/s", MCPServers: []models.MCPServer{ownServer},
			Executable: "/usr/local/bin/agentqueued", Profile: models.Profile{PermissionMode: "plan"}},
			[]string{"mcp__agentqueued"}},
		{"read-only is plan mode", agent.RunContext{Executable: "/usr/local/bin/agentqueued",
			Profile: models.Profile{PermissionMode: "read-only"}}, nil},
		{"the profile names them already", agent.RunContext{StateDir: "/s", MCPServers: []models.MCPServer{ownServer},
			Executable: "/aq", Profile: models.Profile{AllowedTools: []string{"mcp__agentqueued", "Bash(/aq agent:*)"}}},
			[]string{"mcp__agentqueued", "Bash(/aq agent:*)"}},
		{"other servers only", agent.RunContext{StateDir: "/s", MCPServers: []models.MCPServer{{Name: "docs", URL: "https://d.example/mcp"}}},
			nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inv, err := agent.Claude{}.Invocation(c.rc)
			if err != nil {
				t.Fatal(err)
			}
			if got := flagValues(inv.Argv, "--allowedTools"); !slices.Equal(got, c.want) {
				t.Errorf("--allowedTools %q, want %q (argv %q)", got, c.want, inv.Argv)
			}
		})
	}
}

// TestClaudeOffersAgentqueuedToolsDirectly: with agentqueued's own server,
// a claude run gets ENABLE_TOOL_SEARCH=false, so that Claude Code offers
// the server's tools to the model directly instead of behind ToolSearch;
// an agent that sets the variable itself keeps its own value.
func TestClaudeOffersAgentqueuedToolsDirectly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		rc   agent.RunContext
		want map[string]string
	}{
		{"own server", agent.RunContext{StateDir: "/s", MCPServers: []models.MCPServer{ownServer}},
			map[string]string{"ENABLE_TOOL_SEARCH": "false"}},
		{"other servers only", agent.RunContext{StateDir: "/s", MCPServers: []models.MCPServer{{Name: "docs", URL: "https://d.example/mcp"}}}, nil},
		{"no servers", agent.RunContext{}, nil},
		{"the agent's env sets it", agent.RunContext{StateDir: "/s", MCPServers: []models.MCPServer{ownServer},
			Agent: models.Agent{AgentSettings: models.AgentSettings{Env: map[string]string{"ENABLE_TOOL_SEARCH": "true"}}}}, nil},
		{"the agent's pass_env names it", agent.RunContext{StateDir: "/s", MCPServers: []models.MCPServer{ownServer},
			Agent: models.Agent{AgentSettings: models.AgentSettings{PassEnv: []string{"ENABLE_TOOL_SEARCH"}}}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inv, err := agent.Claude{}.Invocation(c.rc)
			if err != nil {
				t.Fatal(err)
			}
			if len(inv.Env) != len(c.want) || inv.Env["ENABLE_TOOL_SEARCH"] != c.want["ENABLE_TOOL_SEARCH"] {
				t.Errorf("Env %v, want %v", inv.Env, c.want)
			}
		})
	}
}

// TestCodexApprovesAgentqueuedTools checks the overrides of agentqueued's
// own server: approved tools (exec's approval policy is never) and a tool
// timeout from the run, so that a blocking ask outlasts Codex's 300 s.
func TestCodexApprovesAgentqueuedTools(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		timeout time.Duration
		servers []models.MCPServer
		want    []string
		absent  []string
	}{
		{"own server", 90 * time.Second, []models.MCPServer{ownServer},
			[]string{`mcp_servers.agentqueued.default_tools_approval_mode="approve"`, `mcp_servers.agentqueued.tool_timeout_sec=90`}, nil},
		{"a timeout rounded up", 61*time.Second + time.Millisecond, []models.MCPServer{ownServer},
			[]string{`mcp_servers.agentqueued.tool_timeout_sec=62`}, nil},
		{"no timeout keeps codex's", 0, []models.MCPServer{ownServer},
			[]string{`mcp_servers.agentqueued.default_tools_approval_mode="approve"`}, []string{"tool_timeout_sec"}},
		{"other servers are not approved", time.Minute, []models.MCPServer{{Name: "db", Command: "db-mcp"}},
			nil, []string{"default_tools_approval_mode", "tool_timeout_sec"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inv, err := agent.Codex{}.Invocation(agent.RunContext{MCPServers: c.servers, ToolTimeout: c.timeout})
			if err != nil {
				t.Fatal(err)
			}
			var overrides []string
			for i, a := range inv.Argv {
				if a == "-c" && i+1 < len(inv.Argv) {
					overrides = append(overrides, inv.Argv[i+1])
				}
			}
			for _, w := range c.want {
				if !slices.Contains(overrides, w) {
					t.Errorf("no -c %s in %q", w, inv.Argv)
				}
			}
			for _, a := range c.absent {
				if strings.Contains(strings.Join(overrides, " "), a) {
					t.Errorf("%s in %q", a, inv.Argv)
				}
			}
		})
	}
}

// TestCodexResumeKeepsInstructions checks that the profile's suffix
// reaches a resumed codex run: exec resume drops developer_instructions,
// so the prompt carries it.
func TestCodexResumeKeepsInstructions(t *testing.T) {
	t.Parallel()
	const suffix = "Run the tests before you finish."
	for _, c := range []struct {
		name, session string
		argv          bool // developer_instructions on the command line
		stdin         string
	}{
		{"fresh", "", true, "Do it.\n"},
		{"resumed", "0199f000-0419-7000-8000-00000000c0de", false, "Do it.\n\n## Standing instructions\n\n" + suffix + "\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inv, err := agent.Codex{}.Invocation(agent.RunContext{Prompt: "Do it.\n", SessionID: c.session,
				Profile: models.Profile{SystemPromptSuffix: suffix}})
			if err != nil {
				t.Fatal(err)
			}
			onArgv := slices.Contains(inv.Argv, `developer_instructions="`+suffix+`"`)
			if onArgv != c.argv {
				t.Errorf("developer_instructions on argv: %t, want %t (%q)", onArgv, c.argv, inv.Argv)
			}
			if inv.Stdin != c.stdin {
				t.Errorf("stdin %q, want %q", inv.Stdin, c.stdin)
			}
		})
	}
}

// TestPermissionModesPerCLI checks what each adapter passes for a
// profile's permission mode: its own values, another CLI's translated, and
// a refusal naming the accepted values.
func TestPermissionModesPerCLI(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a     agent.Adapter
		mode  string
		flag  string // the flag that carries the mode
		want  string // its value; "" when no flag is passed
		wrong bool
	}{
		{agent.Claude{}, "acceptEdits", "--permission-mode", "acceptEdits", false},
		{agent.Claude{}, "dontAsk", "--permission-mode", "dontAsk", false},
		{agent.Claude{}, "auto", "--permission-mode", "auto", false},
		{agent.Claude{}, "manual", "--permission-mode", "default", false},
		{agent.Claude{}, "read-only", "--permission-mode", "plan", false},
		{agent.Claude{}, "danger-full-access", "--permission-mode", "bypassPermissions", false},
		{agent.Claude{}, "workspace-write", "", "", true},
		{agent.Claude{}, "yolo", "", "", true},
		{agent.Codex{}, "", "-s", "workspace-write", false},
		{agent.Codex{}, "read-only", "-s", "read-only", false},
		{agent.Codex{}, "plan", "-s", "read-only", false},
		{agent.Codex{}, "acceptEdits", "-s", "workspace-write", false},
		{agent.Codex{}, "bypassPermissions", "-s", "danger-full-access", false},
		{agent.Codex{}, "default", "", "", true},
		{agent.Codex{}, "dontAsk", "", "", true},
		{agent.Cursor{}, "force", "--force", "", false},
		{agent.Cursor{}, "bypassPermissions", "--force", "", false},
		{agent.Cursor{}, "read-only", "--mode", "plan", false},
		{agent.Cursor{}, "ask", "--mode", "ask", false},
		{agent.Cursor{}, "acceptEdits", "", "", true},
	}
	for _, c := range cases {
		inv, err := c.a.Invocation(agent.RunContext{PromptFile: "/p", Profile: models.Profile{PermissionMode: c.mode}})
		if c.wrong {
			if err == nil || !strings.Contains(err.Error(), "accepted: "+models.PermissionModes[c.a.Type()][0]) {
				t.Errorf("%s %q: error %v, want one listing the accepted modes", c.a.Type(), c.mode, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %q: %v", c.a.Type(), c.mode, err)
			continue
		}
		i := slices.Index(inv.Argv, c.flag)
		switch {
		case i < 0:
			t.Errorf("%s %q: no %s in %q", c.a.Type(), c.mode, c.flag, inv.Argv)
		case c.want != "" && (i+1 >= len(inv.Argv) || inv.Argv[i+1] != c.want):
			t.Errorf("%s %q: %q, want %s %s", c.a.Type(), c.mode, inv.Argv, c.flag, c.want)
		}
	}
}

// TestShellFallback checks which runs are offered `<AQ_BIN> agent …` in a
// shell: not codex in a sandbox (its socket is unreachable there), not a
// mode that runs no commands, not aider.
func TestShellFallback(t *testing.T) {
	t.Parallel()
	cases := []struct {
		a    agent.Adapter
		mode string
		want bool
	}{
		{agent.Claude{}, "", true},
		{agent.Claude{}, "acceptEdits", true},
		{agent.Claude{}, "plan", false},
		{agent.Codex{}, "", false},
		{agent.Codex{}, "workspace-write", false},
		{agent.Codex{}, "read-only", false},
		{agent.Codex{}, "danger-full-access", true},
		{agent.Cursor{}, "", true},
		{agent.Cursor{}, "plan", false},
		{agent.Aider{}, "", false},
		{agent.Command{}, "", true},
	}
	for _, c := range cases {
		if got := agent.ShellFallback(c.a, models.Profile{PermissionMode: c.mode}); got != c.want {
			t.Errorf("%s %q: ShellFallback %t, want %t", c.a.Type(), c.mode, got, c.want)
		}
	}
}

// TestPassesMCPServers checks which runs get the run's MCP servers, and
// that each adapter's answer is what its invocation does: the prompt
// offers agentqueued's MCP tools only to runs that get the server.
func TestPassesMCPServers(t *testing.T) {
	t.Parallel()
	const marker = "/probe/mcp-server-binary"
	server := models.MCPServer{Name: "agentqueued", Command: marker, Args: []string{"mcp"}}
	cases := []struct {
		a    agent.Adapter
		mode string
		want bool
	}{
		{agent.Claude{}, "", true},
		{agent.Claude{}, "plan", true},
		{agent.Codex{}, "", true},
		{agent.Codex{}, "danger-full-access", true},
		{agent.Cursor{}, "", false},
		{agent.Cursor{}, "force", false},
		{agent.Aider{}, "", false},
		{agent.Command{}, "", false},
	}
	for _, c := range cases {
		name := c.mode
		if name == "" {
			name = "no mode"
		}
		t.Run(c.a.Type()+" "+name, func(t *testing.T) {
			t.Parallel()
			p := models.Profile{PermissionMode: c.mode}
			if got := agent.PassesMCPServers(c.a, p); got != c.want {
				t.Errorf("PassesMCPServers %t, want %t", got, c.want)
			}
			inv, err := c.a.Invocation(agent.RunContext{Agent: models.Agent{ID: "a1", AgentSettings: models.AgentSettings{Command: "/bin/agent"}},
				Profile: p, MCPServers: []models.MCPServer{server}, StateDir: "/s", PromptFile: "/s.prompt", Prompt: "work"})
			if err != nil {
				t.Fatal(err)
			}
			passed := slices.ContainsFunc(inv.Argv, func(a string) bool { return strings.Contains(a, marker) })
			for _, content := range inv.Files {
				passed = passed || strings.Contains(content, marker)
			}
			if passed != c.want {
				t.Errorf("the invocation passes the server: %t, PassesMCPServers says %t (argv %q, files %q)", passed, c.want, inv.Argv, inv.Files)
			}
		})
	}
}
