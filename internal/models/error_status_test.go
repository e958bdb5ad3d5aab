package models_test

import (
	"net/http"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestErrorCodeHTTPStatus(t *testing.T) {
	t.Parallel()
	for code, want := range map[models.ErrorCode]int{
		models.CodeInvalid: http.StatusBadRequest, models.CodeNotFound: http.StatusNotFound,
		models.CodeConflict: http.StatusConflict, models.CodeUnauthorized: http.StatusUnauthorized,
		models.CodeUnavailable: http.StatusServiceUnavailable, models.ErrorCode("other"): http.StatusInternalServerError,
	} {
		if got := code.HTTPStatus(); got != want {
			t.Errorf("%s.HTTPStatus() = %d, want %d", code, got, want)
		}
	}
}
