package main

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// systemdExecStart returns the command line of the systemd unit in
// configs/, with %h (the user's home) replaced by home.
func systemdExecStart(t *testing.T, home string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "configs", "systemd", "agentqueued.service"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if cmd, ok := strings.CutPrefix(line, "ExecStart="); ok {
			return strings.Fields(strings.ReplaceAll(cmd, "%h", home))
		}
	}
	t.Fatal("the systemd unit has no ExecStart")
	return nil
}

// launchdProgramArguments returns the ProgramArguments of the launchd
// property list in configs/, with /Users/YOU (the user's home, which the
// install steps replace) replaced by home.
func launchdProgramArguments(t *testing.T, home string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "configs", "launchd", "io.github.agentqueued.plist"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	var (
		args           []string
		key, text      string
		inArgs, inText bool
	)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the launchd property list: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inText, text = true, ""
			if tok.Name.Local == "array" && key == "ProgramArguments" {
				inArgs = true
			}
		case xml.CharData:
			if inText {
				text += string(tok)
			}
		case xml.EndElement:
			inText = false
			switch {
			case tok.Name.Local == "key":
				key = text
			case tok.Name.Local == "array" && inArgs:
				return args
			case tok.Name.Local == "string" && inArgs:
				args = append(args, strings.ReplaceAll(text, "/Users/YOU", home))
			}
		}
	}
	t.Fatal("the launchd property list has no ProgramArguments array")
	return nil
}

// TestServiceFilesStartTheDaemon: the command lines of the systemd unit
// and the launchd property list in configs/ name the binary where `go
// install` puts it and start the daemon from the configuration `init`
// writes; launchd's logs to a file of mode 0600.
func TestServiceFilesStartTheDaemon(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		argv func(t *testing.T, home string) []string
		// logFile is the log file the command line names, under home.
		logFile string
	}{
		{"systemd", systemdExecStart, ""},
		{"launchd", launchdProgramArguments, "Library/Logs/agentqueued/agentqueued.log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			argv := tt.argv(t, home)
			if want := filepath.Join(home, "go", "bin", "agentqueued"); len(argv) < 2 || argv[0] != want {
				t.Fatalf("the service runs %q; want %s run ...", argv, want)
			}
			// Where init writes its configuration; a free port instead
			// of the default one.
			cfg := filepath.Join(home, ".config", "agentqueued", "config.yaml")
			if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Dir(cfg), "config.yaml", "data_dir: "+filepath.Join(home, "data")+"\nlisten: 127.0.0.1:0\n")
			d, err := startMain(t, map[string]string{"HOME": home}, argv[1:]...)
			if err != nil {
				t.Fatalf("%q: %v", argv, err)
			}
			mustCtl(t, d.m.Addr(), "health")
			if err := d.m.Close(); err != nil {
				t.Fatal(err)
			}
			log := d.logs.String()
			if tt.logFile != "" {
				path := filepath.Join(home, tt.logFile)
				fi, err := os.Stat(path)
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("the log file %s: %v, %v", path, fi, err)
				}
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				log = string(b)
			}
			if !strings.Contains(log, `msg="agentqueued listening"`) {
				t.Errorf("no listening line in the daemon's log:\n%s", log)
			}
		})
	}
}
