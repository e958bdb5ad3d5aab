package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentqueued/agentqueued/internal/agent"
)

func main() {
	// A runner's agent runs under its shim, `agentqueued runner shim
	// --status FILE -- PROGRAM ARGS...` (hidden): it outlives the runner
	// and writes how the agent ended (agent.RunShim).
	if len(os.Args) > 2 && os.Args[1] == "runner" && os.Args[2] == "shim" {
		os.Exit(agent.RunShim(os.Args[3:]))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := NewMain(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv).Exec(ctx)
	stop()
	os.Exit(code)
}
