package hooks_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// The example hooks of configs/hooks are what users copy: each must decode
// strictly as a hook and be valid.
func TestExampleHooksAreValid(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../../configs/hooks/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("%d example hooks", len(files))
	}
	seen := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s models.HookSpec
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		if err := d.Decode(&s); err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		h := s.Hook()
		if err := h.Validate(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		seen[h.Trigger.Type] = true
	}
	for _, tt := range []string{models.TriggerPeriodic, models.TriggerCron, models.TriggerEvent} {
		if !seen[tt] {
			t.Errorf("no example of a %s trigger", tt)
		}
	}
}
