package service

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentqueued/agentqueued/internal/service/areas/areastest"
)

// TestEveryAreaIsAsserted: service.go asserts at compile time that the
// service implements each interface of package areas, so that a method
// an area gains and the service lacks fails the build here rather than in
// one of the clients that ask for the area.
func TestEveryAreaIsAsserted(t *testing.T) {
	t.Parallel()
	asserted, _ := areastest.Asserted(t, "service.go", "")
	for _, a := range areastest.Interfaces(t, filepath.Join("areas")) {
		if !slices.Contains(asserted, a) {
			t.Errorf("service.go does not assert that *Service implements areas.%s", a)
		}
	}
}
