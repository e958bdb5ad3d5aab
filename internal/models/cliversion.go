package models

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The oldest CLI versions known to work with the daemon without a known
// defect, per agent type. Older versions run, with a warning.
const (
	// ClaudeKnownGood: Claude Code before it often began its first turn
	// before its MCP servers had connected, so that turn had none of the
	// daemon's tools.
	ClaudeKnownGood = "2.1.221"
	// CodexKnownGood: the oldest Codex CLI version the daemon's flags were
	// checked with.
	CodexKnownGood = "0.169.0"
)

// The CLI versions the end-to-end tests run (pinned in
// .ci/clis/package.json): the newest known to work with the daemon. Never
// below the known-good version of their type.
const (
	ClaudeTested = "2.1.332"
	CodexTested  = "0.171.0"
)

// TestedCLIVersion returns the CLI version of an agent type the end-to-end
// tests run, "" when none is tested.
func TestedCLIVersion(agentType string) string {
	switch agentType {
	case "claude":
		return ClaudeTested
	case "codex":
		return CodexTested
	}
	return ""
}

// KnownGoodCLIVersion returns the known-good CLI version of an agent type,
// "" when none is known.
func KnownGoodCLIVersion(agentType string) string {
	switch agentType {
	case "claude":
		return ClaudeKnownGood
	case "codex":
		return CodexKnownGood
	}
	return ""
}

// versionPattern finds a dotted version number in a CLI's words.
var versionPattern = regexp.MustCompile(`\d+(?:\.\d+){1,3}`)

// ParseCLIVersion returns the first dotted version number in out
// ("codex-cli 0.169.0" → "0.169.0"), "" when there is none.
func ParseCLIVersion(out string) string { return versionPattern.FindString(out) }

// CLIVersionBelow reports whether version v is older than known; a version
// that cannot be read is not below anything.
func CLIVersionBelow(v, known string) bool {
	a, b := versionParts(ParseCLIVersion(v)), versionParts(known)
	if a == nil || b == nil {
		return false
	}
	for i := range max(len(a), len(b)) {
		var x, y int
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			return x < y
		}
	}
	return false
}

func versionParts(v string) []int {
	if v == "" {
		return nil
	}
	var out []int
	for _, s := range strings.Split(v, ".") {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// CLIVersionWarning says why a CLI version is not known to be good for an
// agent type, "" when it is (or when nothing is known of the type or the
// version).
func CLIVersionWarning(agentType, version string) string {
	known := KnownGoodCLIVersion(agentType)
	if known == "" || version == "" || !CLIVersionBelow(version, known) {
		return ""
	}
	return fmt.Sprintf("%s %s is older than %s, the oldest version known to work well", agentType, version, known)
}
