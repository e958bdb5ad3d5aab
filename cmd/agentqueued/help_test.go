package main

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// runNoDaemon runs the program with args and no daemon, and returns its exit
// status and output.
func runNoDaemon(t *testing.T, args ...string) ctlResult {
	t.Helper()
	var stdout, stderr syncBuffer
	code := NewMain(args, &stdout, &stderr, envOf(nil)).Exec(context.Background())
	return ctlResult{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// listsCommand reports whether text has a line naming the command "group
// verb" (or the single word group): the line starts with the group and
// names the verb among its words, "|" separating alternatives.
func listsCommand(text, command string) bool {
	group, verb, _ := strings.Cut(command, " ")
	for line := range strings.SplitSeq(text, "\n") {
		words := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '|' })
		if i := slices.Index(words, group); i >= 0 && (verb == "" || i <= 1 && slices.Contains(words[i+1:], verb)) {
			return true
		}
	}
	return false
}

func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	var commands []string
	for k := range ctlCommands {
		commands = append(commands, k)
	}
	for k := range agentCommands {
		commands = append(commands, k)
	}
	commands = append(commands, "run", "init", "doctor", "ctl", "agent", "mcp", "demo", "version", "help")
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"ctl", "-h"}} {
		r := runNoDaemon(t, args...)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "Usage:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want the usage", args, r.code, r.stdout, r.stderr)
			continue
		}
		for _, c := range commands {
			if !listsCommand(r.stdout, c) {
				t.Errorf("%v does not list %q:\n%s", args, c, r.stdout)
			}
		}
	}
}

func TestAgentHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	r := runNoDaemon(t, "agent", "-h")
	if r.code != 0 {
		t.Fatalf("agent -h: exit %d, stderr %q", r.code, r.stderr)
	}
	for name := range agentCommands {
		if !listsCommand(r.stdout, name) {
			t.Errorf("agent -h does not list %q:\n%s", name, r.stdout)
		}
	}
}

func TestUsageErrorIsOneLineAndAPointer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, "error: unknown command \"frobnicate\" (want run, init, doctor, land, ctl, agent, mcp, runner, demo, version or help)\n" +
			"Run \"agentqueued -h\" for usage.\n"},
		{[]string{"ctl", "task", "add", "--bogus"}, "error: agentqueued ctl task add: flag provided but not defined: -bogus\n" +
			"Run \"agentqueued ctl task add -h\" for usage.\n"},
		{[]string{"ctl", "task", "show"}, "error: ctl task show: want ID, got 0 argument(s)\n" +
			"Run \"agentqueued ctl task show -h\" for usage.\n"},
		{[]string{"ctl"}, "error: ctl: missing command\nRun \"agentqueued ctl -h\" for usage.\n"},
		{[]string{"ctl", "--addr", "http://127.0.0.1:1", "task", "logs", "--attempt", "-1", "x"},
			"error: ctl task logs: --attempt must not be negative\nRun \"agentqueued ctl task logs -h\" for usage.\n"},
		{[]string{"agent", "dance"}, "error: agent: unknown command \"dance\" (want one of approve, ask, complete, fail, " +
			"heartbeat, plan, progress, rate-limited, reject, usage)\nRun \"agentqueued agent -h\" for usage.\n"},
		{[]string{"run", "--bogus"}, "error: agentqueued run: flag provided but not defined: -bogus\nRun \"agentqueued run -h\" for usage.\n"},
	}
	for _, tt := range tests {
		r := runNoDaemon(t, tt.args...)
		if r.code != exitUsage || r.stderr != tt.want {
			t.Errorf("%v: exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", tt.args, r.code, r.stderr, exitUsage, tt.want)
		}
	}
}

func TestRequiresApprovalHelpSaysWhatApprovalMeans(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"add", "edit"} {
		r := runNoDaemon(t, "ctl", "task", cmd, "-h")
		help := strings.Join(strings.Fields(r.stdout), " ")
		for _, want := range []string{"AWAITING_APPROVAL", "pull request", "ctl task approve", "ctl task reject"} {
			if !strings.Contains(help, want) {
				t.Errorf("ctl task %s -h: --requires-approval does not mention %q:\n%s", cmd, want, r.stdout)
			}
		}
	}
}
