package api_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

func TestRunners(t *testing.T) {
	t.Parallel()
	const admin = "admin-token"
	e := newEnv(t, api.Config{Token: admin})

	r := e.do("POST", "/api/v1/runners", `{"name":"build-1","labels":["gpu","linux"],"capacity":2}`)
	var added api.RunnerAdded
	r.decode(t, http.StatusCreated, &added)
	if added.Runner.Name != "build-1" || added.Runner.State != models.RunnerActive || added.Runner.Capacity != 2 ||
		!slices.Equal(added.Runner.Labels, []string{"gpu", "linux"}) || added.Runner.Agents == nil {
		t.Fatalf("added %+v", added.Runner)
	}
	if !strings.HasPrefix(added.Token, "aqr_") || len(added.Token) != 4+43 {
		t.Fatalf("token %q", added.Token)
	}
	if got := r.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store on the answer with the token", got)
	}
	var minimal api.RunnerAdded
	e.do("POST", "/api/v1/runners", `{"name":"a-box"}`).decode(t, http.StatusCreated, &minimal)
	if minimal.Runner.Capacity != 0 || minimal.Runner.Labels == nil || len(minimal.Runner.Labels) != 0 {
		t.Fatalf("a runner of defaults: %+v", minimal.Runner)
	}

	refused := []struct {
		body   string
		status int
		code   models.ErrorCode
		msg    string
	}{
		{`{"name":"build-1"}`, 409, models.CodeConflict, `runner "build-1" already exists`},
		{`{"name":"Build 1"}`, 400, models.CodeInvalid, "name: runner name"},
		{`{}`, 400, models.CodeInvalid, `name: runner name ""`},
		{`{"name":"r","labels":["GPU"]}`, 400, models.CodeInvalid, "labels[0]"},
		{`{"name":"r","capacity":1001}`, 400, models.CodeInvalid, "capacity"},
		{`{"name":"r","capacity":-1}`, 400, models.CodeInvalid, "capacity"},
		{`{"name":"r","capacity":1.5}`, 400, models.CodeInvalid, "capacity"},
		{`{"name":"r","token":"aqr_mine"}`, 400, models.CodeInvalid, `unknown field "token"`},
		{`{"name":"r","state":"DRAINING"}`, 400, models.CodeInvalid, `unknown field "state"`},
		{`{"Name":"r"}`, 400, models.CodeInvalid, `"Name"`},
	}
	for _, tc := range refused {
		e.do("POST", "/api/v1/runners", tc.body).wantError(t, tc.status, tc.code, tc.msg)
	}

	var list api.RunnerList
	r = e.do("GET", "/api/v1/runners", "")
	r.decode(t, http.StatusOK, &list)
	if len(list.Runners) != 2 || list.Runners[0].Name != "a-box" || list.Runners[1].Name != "build-1" {
		t.Fatalf("runners %+v", list.Runners)
	}
	for _, secret := range []string{added.Token, minimal.Token, models.RunnerTokenHash(added.Token)} {
		if strings.Contains(string(r.body), secret) {
			t.Errorf("the list shows a token or its hash: %s", r.body)
		}
	}
	var one models.Runner
	e.do("GET", "/api/v1/runners/build-1", "").decode(t, http.StatusOK, &one)
	if one.Name != "build-1" || one.Capacity != 2 {
		t.Fatalf("runner build-1 = %+v", one)
	}
	e.do("GET", "/api/v1/runners/ghost", "").wantError(t, 404, models.CodeNotFound, `runner "ghost" not found`)
	e.do("GET", "/api/v1/runners?x=1", "").wantError(t, 400, models.CodeInvalid, "")

	var drained models.Runner
	e.do("POST", "/api/v1/runners/build-1/drain", "").decode(t, http.StatusOK, &drained)
	if drained.State != models.RunnerDraining {
		t.Fatalf("drained %+v", drained)
	}
	e.do("POST", "/api/v1/runners/ghost/drain", "").wantError(t, 404, models.CodeNotFound, `runner "ghost" not found`)
	var resumed models.Runner
	e.do("POST", "/api/v1/runners/build-1/resume", "").decode(t, http.StatusOK, &resumed)
	if resumed.State != models.RunnerActive {
		t.Fatalf("resumed %+v", resumed)
	}

	if r := e.do("DELETE", "/api/v1/runners/build-1", ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	e.do("DELETE", "/api/v1/runners/build-1", "").wantError(t, 404, models.CodeNotFound, `runner "build-1" not found`)
	e.do("PUT", "/api/v1/runners/a-box", "{}").wantError(t, 405, models.CodeInvalid, "allowed: GET, DELETE")

	// The runner endpoints take the API's token, as the rest of /api/v1.
	e.token = ""
	e.do("GET", "/api/v1/runners", "").wantError(t, 401, models.CodeUnauthorized, "missing bearer token")
	e.do("POST", "/api/v1/runners", `{"name":"sneaky"}`).wantError(t, 401, models.CodeUnauthorized, "missing bearer token")
	e.token = minimal.Token
	e.do("GET", "/api/v1/runners", "").wantError(t, 401, models.CodeUnauthorized, "invalid bearer token")
	e.token = admin
	if _, err := e.client.GetRunner(context.Background(), "sneaky"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("a runner added without the token: %v", err)
	}
	for _, secret := range []string{added.Token, minimal.Token} {
		if strings.Contains(e.logs.String(), secret) {
			t.Errorf("a runner's token is in the logs:\n%s", e.logs)
		}
	}
}

func TestRunnersThroughTheClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{Token: "tok"})
	c, ctx := e.client, context.Background()
	r, token, err := c.AddRunner(ctx, "r1", []string{"arm64"}, 4)
	if err != nil || r.Name != "r1" || r.Capacity != 4 || !strings.HasPrefix(token, "aqr_") {
		t.Fatalf("AddRunner = %+v, %q, %v", r, token, err)
	}
	if got, err := e.store.RunnerByTokenHash(ctx, models.RunnerTokenHash(token)); err != nil || got.Name != "r1" {
		t.Fatalf("the token's runner: %+v %v", got, err)
	}
	if _, _, err := c.AddRunner(ctx, "r1", nil, 0); models.ErrorCodeOf(err) != models.CodeConflict {
		t.Fatalf("AddRunner again: %v", err)
	}
	if rs, err := c.ListRunners(ctx); err != nil || len(rs) != 1 || !slices.Equal(rs[0].Labels, []string{"arm64"}) {
		t.Fatalf("ListRunners = %+v, %v", rs, err)
	}
	if r, err := c.DrainRunner(ctx, "r1"); err != nil || r.State != models.RunnerDraining {
		t.Fatalf("DrainRunner = %+v, %v", r, err)
	}
	if r, err := c.GetRunner(ctx, "r1"); err != nil || r.State != models.RunnerDraining {
		t.Fatalf("GetRunner = %+v, %v", r, err)
	}
	if r, err := c.ResumeRunner(ctx, "r1"); err != nil || r.State != models.RunnerActive {
		t.Fatalf("ResumeRunner = %+v, %v", r, err)
	}
	if err := c.RemoveRunner(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRunner(ctx, "r1"); models.ErrorCodeOf(err) != models.CodeNotFound {
		t.Fatalf("GetRunner after the removal: %v", err)
	}
	if rs, err := c.ListRunners(ctx); err != nil || rs == nil || len(rs) != 0 {
		t.Fatalf("ListRunners after the removal = %#v, %v", rs, err)
	}
}
