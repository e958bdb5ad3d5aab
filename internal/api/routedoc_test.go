package api_test

import (
	"bufio"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/service/servicetest"
)

// docRoute is one route line of the package documentation's endpoint list:
// a tab, the method (ANY for a pattern without one), spaces, the pattern.
var docRoute = regexp.MustCompile(`^//\t(GET|POST|PUT|PATCH|DELETE|ANY) +(/\S*)`)

// documentedRoutes reads the route lines of the endpoint list of doc.go,
// from "// Endpoints" to the next heading, as "METHOD /pattern".
func documentedRoutes(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var routes []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "// Endpoints"):
			in = true
		case in && strings.HasPrefix(line, "// # "):
			return routes
		case in:
			if m := docRoute.FindStringSubmatch(line); m != nil {
				routes = append(routes, m[1]+" "+m[2])
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !in {
		t.Fatalf("%s has no endpoint list (\"// Endpoints\")", file)
	}
	return routes
}

// servedRoutes are the patterns s registers, each as "METHOD /pattern"
// (ANY for a pattern without a method).
func servedRoutes(s *api.Server) []string {
	var routes []string
	for _, p := range api.Patterns(s) {
		if !strings.Contains(p, " ") {
			p = "ANY " + p
		}
		routes = append(routes, p)
	}
	return routes
}

// The endpoint list of doc.go is the router's: every route the server
// registers, with every optional part configured, has its line, and every
// line names a route the server registers. Without the optional parts the
// server registers fewer routes, all of them documented.
func TestDocumentedRoutesAreServed(t *testing.T) {
	t.Parallel()
	documented := documentedRoutes(t, "doc.go")
	if len(documented) < 40 {
		t.Fatalf("only %d routes read from doc.go's endpoint list: %q", len(documented), documented)
	}
	seen := map[string]bool{}
	for _, r := range documented {
		if seen[r] {
			t.Errorf("doc.go documents %s twice", r)
		}
		seen[r] = true
	}
	svc := servicetest.New(t).Service
	handler := http.NotFoundHandler()
	tests := []struct {
		name string
		cfg  api.Config
		all  bool // every documented route is served
	}{
		{name: "everything configured", all: true, cfg: api.Config{Logs: newFixedLogs(), Hooks: svc,
			Workflows: svc, GitHubWebhook: handler, Metrics: handler, UI: handler}},
		{name: "nothing optional", cfg: api.Config{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := api.New(tt.cfg, svc)
			if err != nil {
				t.Fatalf("api.New: %v", err)
			}
			served := servedRoutes(s)
			for _, r := range served {
				if !seen[r] {
					t.Errorf("%s is served but not in doc.go's endpoint list", r)
				}
			}
			if !tt.all {
				return
			}
			for _, r := range documented {
				if !slices.Contains(served, r) {
					t.Errorf("doc.go documents %s, which the server does not serve", r)
				}
			}
		})
	}
}
