package api_test

import (
	"testing"

	"github.com/agentqueued/agentqueued/internal/service/servicetest"
)

// TestMain puts stand-ins for the agent types' programs on PATH (the
// service registers an agent only when its program resolves), and fails
// the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { servicetest.Main(m) }
