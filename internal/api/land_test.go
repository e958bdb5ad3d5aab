package api_test

import (
	"net/http"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestLandProjectRoute serves POST /api/v1/projects/{id}/land: an empty
// body or {} is a request, any field is refused, and an unknown project
// is not found.
func TestLandProjectRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t, api.Config{})
	e.createProject("web")
	for _, body := range []string{"", "{}"} {
		var res models.LandResult
		e.do(http.MethodPost, "/api/v1/projects/web/land", body).decode(t, http.StatusOK, &res)
		if res.ProjectID != "web" || res.Landed == nil || res.Waiting == nil || res.Failed == nil {
			t.Fatalf("body %q: %+v", body, res)
		}
	}
	e.do(http.MethodPost, "/api/v1/projects/web/land", `{"force": true}`).wantError(t, http.StatusBadRequest,
		models.CodeInvalid, "force")
	e.do(http.MethodPost, "/api/v1/projects/nope/land", "").wantError(t, http.StatusNotFound, models.CodeNotFound, "nope")
	if res, err := e.client.LandProject(t.Context(), "web"); err != nil || res.ProjectID != "web" {
		t.Fatalf("client: %+v %v", res, err)
	}
}
