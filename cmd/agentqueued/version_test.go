package main

import (
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		bi   debug.BuildInfo
		want string
	}{
		{"released", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/agentqueued/agentqueued", Version: "v1.2.0"}},
			"agentqueued v1.2.0 go1.26.8"},
		{"checkout", debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261128100000-0123456789ab"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-11-28T10:00:00Z"}, {Key: "vcs.modified", Value: "false"}}},
			"agentqueued v0.0.0-20261128100000-0123456789ab (commit 0123456789ab 2026-11-28T10:00:00Z) go1.26.8"},
		{"modified", debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"}}},
			"agentqueued (devel) (commit abc, with local changes)"},
		{"no version", debug.BuildInfo{}, "agentqueued (unknown)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := versionOf(&tt.bi).String(); got != tt.want {
				t.Errorf("versionOf = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestVersionOfTheBuiltBinary runs the version command of a binary built
// from this checkout with version control stamping on (as `go build` does
// by default; the environment may turn it off): it names the commit the
// checkout is at.
func TestVersionOfTheBuiltBinary(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "agentqueued")
	if out, err := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("agentqueued version: %v\n%s", err, out)
	}
	line := strings.TrimSpace(string(out))
	if !strings.HasPrefix(line, "agentqueued ") || strings.Contains(line, "(unknown)") {
		t.Fatalf("agentqueued version = %q, want the module version", line)
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Logf("not in a git checkout (%v): the commit is not checked", err)
		return
	}
	if want := "(commit " + strings.TrimSpace(string(head))[:12]; !strings.Contains(line, want) {
		t.Errorf("agentqueued version = %q, want it to contain %q", line, want)
	}
}
