package models_test

import (
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestRunnerValidation(t *testing.T) {
	t.Parallel()
	many := make([]string, models.MaxRunnerLabels+1)
	for i := range many {
		many[i] = "l" + strings.Repeat("x", i)
	}
	tests := []struct {
		name    string
		r       models.Runner
		wantErr string
	}{
		{"minimal", models.Runner{Name: "build-1"}, ""},
		{"labels and capacity", models.Runner{Name: "gpu_box", Labels: []string{"gpu", "linux", "arm64"}, Capacity: 4}, ""},
		{"most labels", models.Runner{Name: "r", Labels: many[:models.MaxRunnerLabels]}, ""},
		{"largest capacity", models.Runner{Name: "r", Capacity: models.MaxRunnerCapacity}, ""},
		{"draining", models.Runner{Name: "r", State: models.RunnerDraining}, ""},
		{"no name", models.Runner{}, `name: runner name ""`},
		{"upper-case name", models.Runner{Name: "Build"}, `name: runner name "Build"`},
		{"name with a slash", models.Runner{Name: "a/b"}, "name: runner name"},
		{"name too long", models.Runner{Name: strings.Repeat("a", 65)}, "name: runner name"},
		{"too many labels", models.Runner{Name: "r", Labels: many}, "labels: at most 20 (got 21)"},
		{"empty label", models.Runner{Name: "r", Labels: []string{"gpu", ""}}, `labels[1]: label ""`},
		{"label with a space", models.Runner{Name: "r", Labels: []string{"has gpu"}}, `labels[0]: label "has gpu"`},
		{"label with a control character", models.Runner{Name: "r", Labels: []string{"gpu\x1b[31m"}}, `labels[0]: label "gpu\x1b[31m"`},
		{"label twice", models.Runner{Name: "r", Labels: []string{"gpu", "linux", "gpu"}}, "labels[2]: gpu is given twice"},
		{"negative capacity", models.Runner{Name: "r", Capacity: -1}, "capacity: must be from 0"},
		{"capacity too large", models.Runner{Name: "r", Capacity: models.MaxRunnerCapacity + 1}, "(got 1001)"},
		{"unknown state", models.Runner{Name: "r", State: "GONE"}, `state: unknown runner state "GONE"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := tc.r
			r.ApplyDefaults()
			err := r.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if r.State != models.RunnerActive && tc.r.State == "" || r.Labels == nil || r.Agents == nil {
					t.Fatalf("defaults not applied: %+v", r)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
			if models.ErrorCodeOf(err) != models.CodeInvalid {
				t.Fatalf("code %s, want invalid", models.ErrorCodeOf(err))
			}
		})
	}
}

func TestRunnerTokenHashIsHexSHA256(t *testing.T) {
	t.Parallel()
	// The SHA-256 of "abc" (FIPS 180-2, appendix B.1).
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := models.RunnerTokenHash("abc"); got != want {
		t.Fatalf("RunnerTokenHash(abc) = %s, want %s", got, want)
	}
}
