package api_test

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/service/areas/areastest"
)

// TestClientAssertsTheAreasItClaims: the Client's doc comment names the
// areas of the service it serves over HTTP and those it does not; every
// area it claims is asserted at compile time in client.go, every area it
// asserts is claimed, and every area of package areas is named one way or
// the other, so that a new area is decided for the client too.
func TestClientAssertsTheAreasItClaims(t *testing.T) {
	t.Parallel()
	areas := areastest.Interfaces(t, filepath.Join("..", "service", "areas"))
	asserted, doc := areastest.Asserted(t, "client.go", "Client")
	claim, _, ok := strings.Cut(doc, "(asserted below)")
	if !ok {
		t.Fatalf("the Client's doc does not list the areas it claims before \"(asserted below)\":\n%s", doc)
	}
	_, claim, _ = strings.Cut(claim, "exposes:")
	word := regexp.MustCompile(`\b[A-Z][A-Za-z]+\b`)
	claimed := word.FindAllString(claim, -1)
	named := word.FindAllString(doc, -1)
	for _, a := range areas {
		switch {
		case slices.Contains(claimed, a) && !slices.Contains(asserted, a):
			t.Errorf("the Client claims areas.%s but client.go does not assert it", a)
		case slices.Contains(asserted, a) && !slices.Contains(claimed, a):
			t.Errorf("client.go asserts areas.%s but the Client's doc does not claim it", a)
		case !slices.Contains(named, a):
			t.Errorf("the Client's doc says nothing of areas.%s: claim it (and assert it) or say why not", a)
		}
	}
}
