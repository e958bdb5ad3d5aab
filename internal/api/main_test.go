package api_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentqueued/agentqueued/internal/service/servicetest"
)

// TestMain puts stand-ins for the agent types' programs on PATH (the
// service registers an agent only when its program resolves), and fails
// the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	restore, err := servicetest.AgentCLIs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	restore()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
