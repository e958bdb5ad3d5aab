package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// binaryVersion describes the running binary from the build information the
// go command records: the module version ("(devel)" for a build outside a
// version control checkout), the commit with its time, and whether the
// checkout had local changes.
type binaryVersion struct {
	Module   string
	Version  string
	Commit   string
	Time     string
	Modified bool
	Go       string
}

// readVersion reads the binary's build information; a binary built without
// it (a test binary) reports "(unknown)".
func readVersion() binaryVersion {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return binaryVersion{Version: "(unknown)"}
	}
	return versionOf(bi)
}

// versionOf extracts what the version command prints from build information.
func versionOf(bi *debug.BuildInfo) binaryVersion {
	v := binaryVersion{Module: bi.Main.Path, Version: bi.Main.Version, Go: bi.GoVersion}
	if v.Version == "" {
		v.Version = "(unknown)"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// String is the version command's line, e.g.
// "agentqueued v1.2.0 (commit 0123abc 2026-11-28T10:00:00Z) go1.26.8".
func (v binaryVersion) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agentqueued %s", v.Version)
	if v.Commit != "" {
		commit := v.Commit
		if len(commit) > 12 {
			commit = commit[:12]
		}
		fmt.Fprintf(&b, " (commit %s", commit)
		if v.Time != "" {
			fmt.Fprintf(&b, " %s", v.Time)
		}
		if v.Modified {
			b.WriteString(", with local changes")
		}
		b.WriteString(")")
	}
	if v.Go != "" {
		fmt.Fprintf(&b, " %s", v.Go)
	}
	return b.String()
}

// module is the module version alone, "devel" for a build outside a
// released version (the MCP server's implementation version).
func (v binaryVersion) module() string {
	switch v.Version {
	case "", "(devel)", "(unknown)":
		return "devel"
	}
	return v.Version
}

// runVersion prints the binary's version.
func (m *Main) runVersion(args []string) error {
	if len(args) > 0 {
		if isHelpFlag(args[0]) {
			fmt.Fprintln(m.Stdout, "Usage: agentqueued version\n\nPrints the module version, the commit it was built from and the Go version.")
			return nil
		}
		return usagef("version: takes no arguments, got %q", args[0])
	}
	fmt.Fprintln(m.Stdout, readVersion())
	return nil
}
