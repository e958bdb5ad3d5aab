package models_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// A project's runner labels are ids, at most MaxRunnerLabels, none twice.
func TestProjectRunnerLabels(t *testing.T) {
	t.Parallel()
	many := make([]string, models.MaxRunnerLabels+1)
	for i := range many {
		many[i] = fmt.Sprintf("l%d", i)
	}
	for _, tc := range []struct {
		labels []string
		msg    string
	}{
		{[]string{"gpu", "linux"}, ""},
		{[]string{"GPU"}, `settings.runner_labels[0]: "GPU" is not a label`},
		{[]string{"gpu", "gpu"}, `settings.runner_labels[1]: "gpu" is listed twice`},
		{many, "settings.runner_labels: at most"},
	} {
		s := models.ProjectSettings{RunnerLabels: tc.labels}
		err := s.Validate()
		if tc.msg == "" && err != nil || tc.msg != "" && (err == nil || !strings.Contains(err.Error(), tc.msg)) {
			t.Errorf("labels %v: %v, want %q", tc.labels, err, tc.msg)
		}
	}
}
