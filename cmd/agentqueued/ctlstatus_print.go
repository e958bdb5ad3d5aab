package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds ctl's printers of the daemon's reports: the budget, the
// status overview with its runners, and the desk.

// printBudget prints token use against the global budget and each
// project's.
func printBudget(w io.Writer, b models.BudgetReport) {
	global := "unlimited"
	if b.Global.Budget != nil {
		global = strconv.FormatInt(*b.Global.Budget, 10)
	}
	fmt.Fprintf(w, "Window: %s (since %s)\n", b.Window, when(b.Since))
	fmt.Fprintf(w, "All projects: %d tokens in the window, global budget %s", b.Global.TokensInWindow, global)
	if b.Global.Exhausted {
		fmt.Fprint(w, " (exhausted: no task starts)")
	}
	fmt.Fprintln(w)
	if len(b.Projects) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := table(w)
	row(tw, "PROJECT", "STATUS", "WINDOW_TOKENS", "TOTAL_TOKENS", "BUDGET", "EXHAUSTED")
	for _, p := range b.Projects {
		row(tw, p.ProjectID, string(p.Status), strconv.FormatInt(p.TokensInWindow, 10), strconv.FormatInt(p.TotalTokensUsed, 10),
			itoa(p.BudgetLimit), strconv.FormatBool(p.Exhausted))
	}
	tw.Flush()
}

// maxStatusTitle bounds a title in the status overview.
const maxStatusTitle = 60

// printStatus prints the daemon's overview: what Discord's /status shows
// (the runners only when there are any), and the budget; ages are
// measured from now.
func printStatus(w io.Writer, now time.Time, o models.Overview) {
	fmt.Fprintf(w, "Projects (%d):\n", len(o.Projects))
	if len(o.Projects) > 0 {
		tw := table(w)
		row(tw, "  PROJECT", "STATUS", "MAX_AGENTS", "WORKING", "TO_LAND", "TASKS")
		for _, p := range o.Projects {
			a := o.ProjectActivity[p.ID]
			row(tw, "  "+p.ID, string(p.Status), strconv.Itoa(p.MaxConcurrentAgents), strconv.Itoa(a.AgentsWorking),
				strconv.Itoa(a.WaitingToLand), models.StatusCounts(o.Counts[p.ID]))
		}
		tw.Flush()
	}
	working := map[string]models.Task{}
	for _, t := range o.Working {
		working[t.ID] = t
	}
	fmt.Fprintf(w, "\nAgents (%d):\n", len(o.Agents))
	if len(o.Agents) > 0 {
		tw := table(w)
		row(tw, "  AGENT", "TYPE", "STATE", "TASK", "DOING")
		for _, a := range o.Agents {
			task, doing := str(a.CurrentTaskID), ""
			if t, ok := working[task]; ok {
				doing = string(t.Status) + ": " + readable(t.Title, maxStatusTitle)
			}
			state := agentState(a, maxListRestReason)
			if a.Paused {
				state += " (paused)"
			}
			row(tw, "  "+a.ID, a.AgentType, state, task, doing)
		}
		tw.Flush()
	}
	fmt.Fprintf(w, "\nAgents working: %d · Waiting to land or verify: %d\n", o.Activity.AgentsWorking, o.Activity.WaitingToLand)
	if len(o.Runners) > 0 {
		fmt.Fprintln(w)
		printStatusRunners(w, now, o.Runners)
	}
	fmt.Fprintln(w)
	printDesk(w, now, o.Desk, o.DeskTruncated)
	if len(o.Rules) > 0 {
		fmt.Fprintf(w, "\nRules: %d in force (ctl rule list)\n", len(o.Rules))
	}
	if o.Budget != nil {
		fmt.Fprintln(w, "\nBudget:")
		printBudget(w, *o.Budget)
	}
}

// printStatusRunners prints the runners of the status overview under
// "Runners (N, M connected):": per runner its state, whether it is
// connected, how long ago it was last seen (from now), its agents, its
// runs in progress and the version it last connected with.
func printStatusRunners(w io.Writer, now time.Time, rs []models.Runner) {
	connected := 0
	for _, r := range rs {
		if r.Connected {
			connected++
		}
	}
	fmt.Fprintf(w, "Runners (%d, %d connected):\n", len(rs), connected)
	tw := table(w)
	row(tw, "  RUNNER", "STATE", "CONNECTED", "LAST_SEEN", "AGENTS", "RUNS", "VERSION")
	for _, r := range rs {
		seen := "never"
		if r.LastSeenAt != nil {
			seen = age(now, *r.LastSeenAt) + " ago"
		}
		row(tw, "  "+r.Name, string(r.State), yesNo(r.Connected), seen, strconv.Itoa(len(r.Agents)),
			strconv.Itoa(r.RunsInProgress), r.Version)
	}
	tw.Flush()
}

// maxDeskWhat bounds what a desk line says of its item, before its notes.
const maxDeskWhat = 72

// printDesk prints what waits on a person under "Waiting on you (N):",
// oldest first: per item, one line with how long it has waited (from
// now), its kind, whose it is and what it asks, with notes, then the
// command that ends the wait (and the address of a pull request) on the
// next line. Text from the API is cleaned.
func printDesk(w io.Writer, now time.Time, items []models.DeskItem, truncated bool) {
	more := ""
	if truncated {
		more = "+"
	}
	fmt.Fprintf(w, "Waiting on you (%d%s):\n", len(items), more)
	if len(items) == 0 {
		fmt.Fprintln(w, "  nothing")
		return
	}
	type line struct{ age, kind, whose, what string }
	lines := make([]line, len(items))
	var ageW, kindW, whoseW int
	for i, it := range items {
		l := line{age: age(now, it.Since), kind: string(it.Kind), whose: deskWhose(it), what: readable(it.What, maxDeskWhat)}
		if notes := deskNotes(now, it); len(notes) > 0 {
			l.what += " (" + strings.Join(notes, "; ") + ")"
		}
		l.kind, l.whose = clean(l.kind), clean(l.whose)
		ageW, kindW, whoseW = max(ageW, len([]rune(l.age))), max(kindW, len([]rune(l.kind))), max(whoseW, len([]rune(l.whose)))
		lines[i] = l
	}
	indent := strings.Repeat(" ", 2+ageW+2)
	for i, l := range lines {
		fmt.Fprintf(w, "  %s  %s  %s  %s\n", padLeft(l.age, ageW), pad(l.kind, kindW), pad(l.whose, whoseW), l.what)
		action := items[i].Action
		cmd := readable(action.Command, 0)
		if u := action.URL; strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
			cmd += "  " + readable(u, 0)
		}
		if cmd != "" {
			fmt.Fprintf(w, "%s→ %s\n", indent, cmd)
		}
	}
	if truncated {
		fmt.Fprintf(w, "  … and more (the desk lists the oldest %d)\n", len(items))
	}
}

// deskWhose says whose a desk item is: project/task, the agent, or the
// project.
func deskWhose(it models.DeskItem) string {
	switch {
	case it.TaskID != "":
		return it.ProjectID + "/" + it.TaskID
	case it.AgentID != "":
		return "agent " + it.AgentID
	}
	return it.ProjectID
}

// deskNotes are what a desk line adds to an item's text: the tasks
// blocked behind it, that the run that asked has ended, when a question
// expires.
func deskNotes(now time.Time, it models.DeskItem) []string {
	var notes []string
	if it.Behind > 0 {
		notes = append(notes, fmt.Sprintf("%d task(s) behind it", it.Behind))
	}
	if it.RunEnded {
		notes = append(notes, "its run ended: the answer starts a new one")
	}
	if it.ExpiresAt != nil {
		if it.ExpiresAt.After(now) {
			notes = append(notes, "expires in "+span(it.ExpiresAt.Sub(now)))
		} else {
			notes = append(notes, "expired")
		}
	}
	return notes
}

// age says how long ago t was, from now (span); "-" when t is unset.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return span(now.Sub(t))
}

// span says a duration in its largest whole unit: 45s, 12m, 3h (up to two
// days), 2d; a negative one is 0s.
func span(d time.Duration) string {
	d = max(d, 0)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// pad and padLeft fill s with spaces to n characters, after or before it.
func pad(s string, n int) string { return s + strings.Repeat(" ", max(n-len([]rune(s)), 0)) }

func padLeft(s string, n int) string { return strings.Repeat(" ", max(n-len([]rune(s)), 0)) + s }
