package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := NewMain(os.Args[1:], os.Stdout, os.Stderr, os.LookupEnv).Exec(ctx)
	stop()
	os.Exit(code)
}
