package config_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/config"
)

// TestCheckServingRefusesAnOpenListenerWithoutToken: serving the API
// beyond loopback without api.token would let anyone on the network
// drive the daemon (create hooks that run commands); it must refuse to
// start with a message naming both settings.
func TestCheckServingRefusesAnOpenListenerWithoutToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		listen, token string
		ok            bool
	}{
		{"127.0.0.1:7700", "", true},
		{"127.0.0.2:7700", "", true},
		{"localhost:0", "", true},
		{"LOCALHOST:7700", "", true},
		{"[::1]:7700", "", true},
		{"0.0.0.0:7700", "", false},
		{":7700", "", false},
		{"[::]:7700", "", false},
		{"192.168.1.20:7700", "", false},
		{"agentqueued.lan:7700", "", false},
		{"0.0.0.0:7700", "9f86d081884c7d659a2feaa0c55ad015", true},
		{"192.168.1.20:7700", "9f86d081884c7d659a2feaa0c55ad015", true},
	}
	for _, tt := range tests {
		t.Run(tt.listen+"/"+tt.token, func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.Listen, cfg.API.Token = tt.listen, tt.token
			cfg.API.TLSCert, cfg.API.TLSKey = "/etc/aq/cert.pem", "/etc/aq/key.pem" // TLS is TestCheckServingRefusesPlainHTTPBeyondLoopback's
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			err := cfg.CheckServing()
			if tt.ok {
				if err != nil {
					t.Fatalf("CheckServing: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("CheckServing accepted an API beyond loopback without a token")
			}
			for _, want := range []string{"listen", "api.token", tt.listen} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}

// TestCheckServingRefusesPlainHTTPBeyondLoopback: beyond loopback without
// TLS every token (the API's, the dashboard's login, the runners') would
// cross the network in the clear. The start is refused with why and both
// fixes: the certificate's keys, or loopback behind a TLS reverse proxy.
// Loopback needs no TLS.
func TestCheckServingRefusesPlainHTTPBeyondLoopback(t *testing.T) {
	t.Parallel()
	const token = "9f86d081884c7d659a2feaa0c55ad015"
	for _, tc := range []struct {
		listen, token string
		tls           bool
		want          []string // in the error; none: accepted
	}{
		{"127.0.0.1:7700", "", false, nil},
		{"127.0.0.9:7700", token, false, nil},
		{"[::1]:7700", "", false, nil},
		{"0.0.0.0:7700", token, true, nil},
		{"0.0.0.0:7700", token, false, []string{"0.0.0.0:7700", "without TLS", "in the clear", "api.tls_cert", "api.tls_key",
			"127.0.0.1 behind a TLS reverse proxy"}},
		{"192.168.1.20:7700", token, false, []string{"192.168.1.20:7700", "without TLS", "in the clear"}},
		{":7700", token, false, []string{"every interface", "without TLS"}},
		{"agentqueued.lan:7700", token, false, []string{"agentqueued.lan", "without TLS"}},
		// Neither: one error with both fixes.
		{"0.0.0.0:7700", "", false, []string{"without api.token and without TLS", "set api.token", "api.tls_cert",
			"in the clear", "TLS reverse proxy"}},
	} {
		t.Run(fmt.Sprintf("%s/token=%v/tls=%v", tc.listen, tc.token != "", tc.tls), func(t *testing.T) {
			t.Parallel()
			cfg := config.Default()
			cfg.Listen, cfg.API.Token = tc.listen, tc.token
			if tc.tls {
				cfg.API.TLSCert, cfg.API.TLSKey = "/etc/aq/cert.pem", "/etc/aq/key.pem"
			}
			err := cfg.CheckServing()
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckServing: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckServing accepted %s without TLS", tc.listen)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// TestCheckServingAfterTheListenFlag: the check runs on the configuration
// as the command line left it, so a loopback file with an open --listen
// is refused and an open file with a loopback --listen is not.
func TestCheckServingAfterTheListenFlag(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(writeFile(t, "listen: 0.0.0.0:7700\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckServing(); err == nil {
		t.Fatal("open listen address from the file accepted without a token")
	}
	cfg.Listen = "127.0.0.1:7700" // --listen
	if err := cfg.CheckServing(); err != nil {
		t.Fatalf("loopback --listen refused: %v", err)
	}
}

func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	cfg, err := config.Load(writeFile(t, "api:\n  allowed_hosts: [agentqueued.lan, 192.168.1.20, \"::1\"]\n"), env(nil))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if want := []string{"agentqueued.lan", "192.168.1.20", "::1"}; !slices.Equal(cfg.API.AllowedHosts, want) {
		t.Errorf("api.allowed_hosts = %q, want %q", cfg.API.AllowedHosts, want)
	}
	bad := []struct{ entry, index string }{
		{"http://agentqueued.lan", "[0]"},
		{"agentqueued.lan:7700", "[0]"},
		{"\"*.example.com\"", "[0]"},
		{"\"\"", "[0]"},
		{"bad host", "[0]"},
	}
	for _, b := range bad {
		t.Run(b.entry, func(t *testing.T) {
			t.Parallel()
			_, err := config.Load(writeFile(t, "api:\n  allowed_hosts: ["+b.entry+"]\n"), env(nil))
			if err == nil || !strings.Contains(err.Error(), "config: api.allowed_hosts"+b.index+":") {
				t.Fatalf("Load with allowed_hosts [%s]: error %v, want one naming api.allowed_hosts%s", b.entry, err, b.index)
			}
		})
	}
}

// TestConfigFileSizeIsCapped: a huge file is refused before it is parsed
// (a 200 MB file once took 1.7 GB to parse), naming the file and the cap.
func TestConfigFileSizeIsCapped(t *testing.T) {
	t.Parallel()
	big := append([]byte("listen: 127.0.0.1:7700\n# "), bytes.Repeat([]byte("x"), config.MaxFileBytes)...)
	path := filepath.Join(t.TempDir(), "huge.yaml")
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path, env(nil))
	if err == nil {
		t.Fatal("Load accepted a file larger than MaxFileBytes")
	}
	for _, want := range []string{path, "1048576 bytes", "1 MiB"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if _, err := config.Parse(big, env(nil)); err == nil || !strings.Contains(err.Error(), "1 MiB") {
		t.Errorf("Parse of a document larger than MaxFileBytes: %v", err)
	}

	// A file of exactly the cap is read.
	ok := append([]byte("listen: 127.0.0.1:7700\n#"), bytes.Repeat([]byte("x"), config.MaxFileBytes-25)...)
	ok = append(ok, '\n')
	if len(ok) != config.MaxFileBytes {
		t.Fatalf("test file is %d bytes", len(ok))
	}
	path = filepath.Join(t.TempDir(), "full.yaml")
	if err := os.WriteFile(path, ok, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(path, env(nil)); err != nil {
		t.Fatalf("Load of a file of MaxFileBytes: %v", err)
	}
}

// TestCheckServingRefusesAWeakTokenBeyondLoopback: beyond loopback
// api.token must hold about 128 bits; on loopback any token will do.
func TestCheckServingRefusesAWeakTokenBeyondLoopback(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, listen, token string
		weak                bool
	}{
		{"one character", "0.0.0.0:7700", "x", true},
		{"a word", "192.168.1.20:7700", "correcthorsebattery", true},
		{"31 hex digits", "0.0.0.0:7700", "0123456789abcdef0123456789abcde", true},
		{"32 hex digits", "0.0.0.0:7700", "0123456789abcdef0123456789abcdef", false},
		{"openssl rand -hex 32", "[::]:7700", "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", false},
		{"21 base64 characters", "0.0.0.0:7700", "qL8vZ2xN0pR5tW7yB1dF3", true},
		{"22 base64 characters", "0.0.0.0:7700", "qL8vZ2xN0pR5tW7yB1dF3h", false},
		{"long but repetitive", "0.0.0.0:7700", strings.Repeat("ab", 40), true},
		{"weak on loopback", "127.0.0.1:7700", "x", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := config.Default()
			c.Listen, c.API.Token = tc.listen, tc.token
			c.API.TLSCert, c.API.TLSKey = "/etc/aq/cert.pem", "/etc/aq/key.pem"
			err := c.CheckServing()
			if !tc.weak {
				if err != nil {
					t.Fatalf("CheckServing: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckServing accepted a weak token on %s", tc.listen)
			}
			for _, want := range []string{"api.token", "openssl rand -hex 32", tc.listen} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if len(tc.token) > 3 && strings.Contains(err.Error(), tc.token) {
				t.Errorf("error %q repeats the token", err)
			}
		})
	}
}
