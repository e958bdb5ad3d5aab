package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// stats prints each project's throughput over the last day: a table of
// tasks by status, completions and means, then the completions hour by
// hour (the models.Stats as JSON with --json).
func (c *ctl) stats(ctx context.Context, args []string) error {
	fs := c.flagSet("stats")
	project := fs.String("project", "", "only project `id`")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	st, err := c.client.Stats(ctx)
	if err != nil {
		return err
	}
	if *project != "" {
		st.Projects = slices.DeleteFunc(st.Projects, func(p models.ProjectStats) bool { return p.ProjectID != *project })
		if len(st.Projects) == 0 {
			return models.Errorf(models.CodeNotFound, "project %q: no such project", *project)
		}
	}
	return c.emit(st, func(w io.Writer) { printStats(w, st) })
}

func printStats(w io.Writer, st models.Stats) {
	if len(st.Projects) == 0 {
		fmt.Fprintln(w, "No projects.")
		return
	}
	tw := table(w)
	row(tw, "PROJECT", "TASKS", "BY STATUS", "ARCHIVED", "DONE 24H", "LAST HOUR", "MEAN WAIT", "MEAN RUN")
	for _, p := range st.Projects {
		total, parts := 0, []string{}
		for _, s := range models.TaskStatuses {
			if n := p.ByStatus[s]; n > 0 {
				total += n
				parts = append(parts, fmt.Sprintf("%s %d", s, n))
			}
		}
		by := strings.Join(parts, ", ")
		if by == "" {
			by = "-"
		}
		last := 0
		if n := len(p.CompletionsPerHour); n > 0 {
			last = p.CompletionsPerHour[n-1].Count
		}
		row(tw, clean(p.ProjectID), strconv.Itoa(total), by, strconv.Itoa(p.Archived), strconv.Itoa(p.Completed),
			strconv.Itoa(last), meanOf(p.MeanQueueWaitSeconds, p.RunsStarted), meanOf(p.MeanRunSeconds, p.RunsEnded))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nCompletions per hour, oldest first (the last is the hour in progress):")
	tw = table(w)
	for _, p := range st.Projects {
		counts := make([]string, len(p.CompletionsPerHour))
		for i, h := range p.CompletionsPerHour {
			counts[i] = strconv.Itoa(h.Count)
		}
		row(tw, "  "+clean(p.ProjectID), strings.Join(counts, " "))
	}
	tw.Flush()
}

// meanOf shows a mean in seconds rounded for people, "-" without samples.
func meanOf(seconds float64, samples int) string {
	if samples == 0 {
		return "-"
	}
	d := time.Duration(seconds * float64(time.Second))
	switch {
	case d >= time.Minute:
		d = d.Round(time.Second)
	case d >= time.Second:
		d = d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		d = d.Round(time.Millisecond)
	default:
		d = d.Round(time.Microsecond)
	}
	return d.String()
}
