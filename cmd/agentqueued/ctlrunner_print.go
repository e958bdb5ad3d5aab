package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's printers of runners.

// printRunnerAdded prints a new runner and its token, with how to use it:
// the daemon never shows the token again.
func printRunnerAdded(w io.Writer, r models.Runner, token string) {
	printRunners(w, []models.Runner{r})
	fmt.Fprintf(w, "\ntoken: %s\n\n", clean(token))
	fmt.Fprintln(w, "This token is not shown again: the daemon keeps only its hash. Save it in a file only you can read")
	fmt.Fprintln(w, "on the runner's machine, and start the runner there with")
	fmt.Fprintln(w, "")
	fmt.Fprintln(w, "  agentqueued runner --server URL --token-file FILE [--ca-file CA.pem]")
	fmt.Fprintln(w, "")
	fmt.Fprintf(w, "where URL is this daemon's address as that machine reaches it (https://HOST:PORT), and CA.pem the\n"+
		"authority of its certificate when that machine's system does not trust it (docs/runners.md, \"A second\n"+
		"machine joins\"). A lost token cannot be read back: remove the runner (ctl runner remove %s) and add it\n"+
		"again.\n", clean(r.Name))
}

func printRunners(w io.Writer, rs []models.Runner) {
	tw := table(w)
	row(tw, "NAME", "STATE", "LABELS", "CAPACITY", "AGENTS", "LAST_SEEN", "CONNECTED")
	for _, r := range rs {
		row(tw, r.Name, string(r.State), strings.Join(r.Labels, ","), capacityCell(r.Capacity),
			strconv.Itoa(len(r.Agents)), whenPtr(r.LastSeenAt), yesNo(r.Connected))
	}
	tw.Flush()
}

// capacityCell is a runner's capacity: "auto" for 0, as many runs as it
// has agents.
func capacityCell(n int) string {
	if n == 0 {
		return "auto"
	}
	return strconv.Itoa(n)
}

// printRunner prints one runner with its agents and its runs in
// progress.
func printRunner(w io.Writer, r models.Runner) {
	tw := table(w)
	row(tw, "Name:", r.Name)
	row(tw, "State:", string(r.State))
	row(tw, "Labels:", strings.Join(r.Labels, ", "))
	capacity := capacityCell(r.Capacity)
	if r.Capacity == 0 {
		capacity += " (as many runs as it has agents)"
	}
	row(tw, "Capacity:", capacity)
	row(tw, "Agents:", strings.Join(r.Agents, ", "))
	row(tw, "Runs:", strconv.Itoa(r.RunsInProgress)+" in progress")
	row(tw, "Connected:", yesNo(r.Connected))
	row(tw, "Last seen:", whenPtr(r.LastSeenAt))
	row(tw, "Version:", r.Version)
	row(tw, "Address:", r.Address)
	row(tw, "Created:", when(r.CreatedAt))
	tw.Flush()
}

// yesNo is a flag as ctl prints it.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
