package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentqueued/agentqueued/internal/models"
)

// Listing sizes of the hooks pages.
const (
	// hookRunsListed is how many latest runs the hooks page lists.
	hookRunsListed = 20
	// hookRunsOfHook is how many runs a hook's page shows in full.
	hookRunsOfHook = 10
)

func init() {
	funcs["prettyJSON"] = prettyJSON
	register(
		Page{Pattern: "GET " + Prefix + "/hooks", Template: "hooks", Nav: NavHooks, Load: (*Server).loadHooks},
		Page{Pattern: "GET " + Prefix + "/hooks/{id}", Template: "hook", Nav: NavHooks, Load: (*Server).loadHook},
	)
	registerAction(Action{Pattern: "POST " + Prefix + "/hooks/{id}/fire", Do: (*Server).fireHook})
}

// hooksPage is the data of the hooks page.
type hooksPage struct {
	Hooks []hookRow
	Runs  []models.HookRun
	Names map[string]string
}

// hookRow is a hook with its latest run.
type hookRow struct {
	Hook models.Hook
	Last *models.HookRun
}

func (s *Server) loadHooks(r *http.Request) (any, error) {
	ctx := r.Context()
	hs, err := s.svc.ListHooks(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("hooks: %w", err)
	}
	runs, err := s.svc.ListHookRuns(ctx, models.HookRunFilter{Limit: hookRunsListed})
	if err != nil {
		return nil, fmt.Errorf("hook runs: %w", err)
	}
	p := hooksPage{Runs: runs, Names: map[string]string{}}
	last := map[string]*models.HookRun{}
	for i := range runs {
		if last[runs[i].HookID] == nil {
			last[runs[i].HookID] = &runs[i]
		}
	}
	for _, h := range hs {
		p.Hooks = append(p.Hooks, hookRow{Hook: h, Last: last[h.ID]})
		p.Names[h.ID] = h.Name
	}
	return p, nil
}

// hookPage is the data of a hook's page: the hook and its latest runs
// with their prompts, responses, actions and tokens.
type hookPage struct {
	Hook models.Hook
	Runs []models.HookRun
}

func (s *Server) loadHook(r *http.Request) (any, error) {
	ctx := r.Context()
	h, err := s.svc.GetHook(ctx, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	runs, err := s.svc.ListHookRuns(ctx, models.HookRunFilter{HookID: h.ID, Limit: hookRunsOfHook})
	if err != nil {
		return nil, fmt.Errorf("runs of hook %s: %w", h.ID, err)
	}
	return hookPage{Hook: h, Runs: runs}, nil
}

// fireHook fires a hook by hand and goes to its page.
func (s *Server) fireHook(r *http.Request) (string, string, error) {
	id := r.PathValue("id")
	run, err := s.svc.FireHook(r.Context(), id, DefaultActor, models.HookFire{})
	if err != nil {
		return "", "", err
	}
	msg := "Hook fired: run " + run.ID + " is " + string(run.Status) + "."
	if run.SkippedReason != nil && *run.SkippedReason != "" {
		msg = "Hook not fired: " + *run.SkippedReason + "."
	}
	return msg, Prefix + "/hooks/" + id, nil
}

// prettyJSON indents a JSON text for reading; other text is returned as
// it is.
func prettyJSON(p *string) string {
	if p == nil {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, []byte(*p), "", "  "); err != nil {
		return *p
	}
	return b.String()
}
