package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/config"
)

// TestMetricsListen: a listener of its own for /metrics has no token, so
// an address beyond loopback is refused unless metrics.allow_remote says
// so, with a message naming the key.
func TestMetricsListen(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		listen     string
		remote     bool
		wantErr    []string
	}{
		{name: "unset serves on the API", yaml: "data_dir: /tmp/x\n"},
		{name: "loopback", yaml: "metrics:\n  listen: 127.0.0.1:9464\n", listen: "127.0.0.1:9464"},
		{name: "localhost port 0", yaml: "metrics:\n  listen: localhost:0\n", listen: "localhost:0"},
		{name: "every interface refused", yaml: "metrics:\n  listen: :9464\n",
			wantErr: []string{"metrics.listen", "metrics.allow_remote", "every interface"}},
		{name: "a LAN address refused", yaml: "metrics:\n  listen: 192.168.1.20:9464\n",
			wantErr: []string{"metrics.listen", "metrics.allow_remote", "192.168.1.20"}},
		{name: "a LAN address allowed", yaml: "metrics:\n  listen: 192.168.1.20:9464\n  allow_remote: true\n",
			listen: "192.168.1.20:9464", remote: true},
		{name: "not host:port", yaml: "metrics:\n  listen: nine\n", wantErr: []string{"metrics.listen", "host:port"}},
		{name: "allow_remote not a bool", yaml: "metrics:\n  listen: 127.0.0.1:1\n  allow_remote: sometimes\n",
			wantErr: []string{"metrics.allow_remote", "sometimes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Parse([]byte(tt.yaml), func(string) (string, bool) { return "", false })
			if err == nil {
				err = cfg.Validate()
			}
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("accepted")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Metrics != (config.MetricsConfig{Listen: tt.listen, AllowRemote: tt.remote}) {
				t.Errorf("metrics %+v, want listen %q allow_remote %v", cfg.Metrics, tt.listen, tt.remote)
			}
		})
	}
}

// TestExampleMetricsSection: the example's commented metrics section,
// turned on, is a valid configuration with a loopback listener.
func TestExampleMetricsSection(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "agentqueued.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(uncommentSections(t, string(data), "metrics")), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Metrics != (config.MetricsConfig{Listen: "127.0.0.1:9464"}) {
		t.Errorf("the example's metrics: %+v", cfg.Metrics)
	}
}
