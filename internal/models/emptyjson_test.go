package models_test

import (
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

func TestEmptyJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"": true, "  ": true, "null": true, "[]": true, "{}": true, "[ \n ]": true, " { } ": true,
		"[1]": false, `{"a":1}`: false, "0": false, "nothing": false, "[": false, "]": false, "[}": false,
	} {
		if got := models.EmptyJSON(in); got != want {
			t.Errorf("EmptyJSON(%q) = %t, want %t", in, got, want)
		}
	}
}
