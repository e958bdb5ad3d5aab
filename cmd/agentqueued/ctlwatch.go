package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/clock"
	"github.com/agentqueued/agentqueued/internal/models"
)

// taskLogs prints a task's run log, the latest attempt's unless
// --attempt; with -f it follows the log while the run goes on and returns
// when the run ends.
func (c *ctl) taskLogs(ctx context.Context, args []string) error {
	fs := c.flagSet("task logs")
	attempt := fs.Int("attempt", 0, "attempt `n` (from 1; default the latest)")
	follow := fs.Bool("f", false, "follow: print the log as the run writes it, until the run ends")
	fs.BoolVar(follow, "follow", false, "the same as -f")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	if *attempt < 0 {
		return usagef("ctl task logs: --attempt must not be negative")
	}
	if c.opts.json {
		return usagef("ctl task logs: --json is not supported: a log is text (GET /api/v1/runs/{id}/tasks/{name}/logs answers JSON)")
	}
	lw := &lineWriter{w: c.out}
	err = c.client.FollowTaskLog(ctx, pos[0], *attempt, *follow, lw)
	lw.Flush()
	if err != nil {
		if ctx.Err() != nil && *follow {
			return nil // interrupted
		}
		return err
	}
	if lw.lines == 0 && !*follow {
		fmt.Fprintf(c.out, "task %s has no log yet\n", clean(pos[0]))
	}
	return nil
}

// lineWriter writes text line by line, each cleaned for the terminal
// (tabs kept), holding a partial line until its end arrives or Flush.
type lineWriter struct {
	w     io.Writer
	buf   []byte
	lines int
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.writeLine(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

// Flush writes a partial last line.
func (l *lineWriter) Flush() {
	if len(l.buf) > 0 {
		l.writeLine(string(l.buf))
		l.buf = nil
	}
}

func (l *lineWriter) writeLine(line string) {
	cells := strings.Split(strings.TrimSuffix(line, "\r"), "\t")
	for j, c := range cells {
		cells[j] = clean(c)
	}
	fmt.Fprintln(l.w, strings.Join(cells, "\t"))
	l.lines++
}

// clearScreen moves a terminal's cursor home and clears the screen.
const clearScreen = "\x1b[H\x1b[2J"

// WatchMinRedraw is the shortest time between two views of ctl watch: the
// changes the daemon reports meanwhile are shown together in the next one.
const WatchMinRedraw = time.Second

// watch prints the unfinished tasks, with each project's counts, again
// after the daemon's state changes (at most once per WatchMinRedraw, a
// burst of changes shown in one view, and at least every --interval),
// until interrupted. On a terminal each view replaces the last; elsewhere views
// follow each other, separated by a blank line.
func (c *ctl) watch(ctx context.Context, args []string) error {
	fs := c.flagSet("watch")
	project := fs.String("project", "", "only tasks of project `id`")
	interval := fs.Duration("interval", api.DefaultChangeWait, "refresh at least this often without a change (`duration`, 1s to "+
		api.MaxChangeWait.String()+")")
	count := fs.Int("count", 0, "stop after `n` views (default: until interrupted)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if *interval < time.Second || *interval > api.MaxChangeWait {
		return usagef("ctl watch: --interval must be from 1s to %s", api.MaxChangeWait)
	}
	if *count < 0 {
		return usagef("ctl watch: --count must not be negative")
	}
	if c.opts.json {
		return usagef("ctl watch: --json is not supported: use ctl status --json or ctl task list --json")
	}
	terminal := isTerminal(c.out)
	unfinished, err := models.ResolveStatusSet("unfinished")
	if err != nil {
		return err
	}
	clk := clock.Or(c.m.ctlClock)
	var (
		seq  uint64
		last time.Time // of the last view
	)
	for n := 0; *count == 0 || n < *count; n++ {
		if n > 0 {
			ch, err := c.client.WaitForChange(ctx, seq, *interval)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			if wait := WatchMinRedraw - clk.Now().Sub(last); ch.Changed && wait > 0 {
				select { // the changes that follow soon go into the same view
				case <-clk.After(wait):
				case <-ctx.Done():
					return nil
				}
			}
		}
		if ch, err := c.client.Changes(ctx); err == nil {
			seq = ch.Seq // the view below is at least as new as this change
		} else if ctx.Err() != nil {
			return nil
		} else {
			return err
		}
		last = clk.Now()
		o, err := c.client.Status(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		ts, err := c.client.ListTasks(ctx, models.TaskFilter{ProjectID: *project, Statuses: unfinished})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		var view bytes.Buffer
		printWatch(&view, o, ts, *project, clk.Now())
		switch {
		case terminal:
			fmt.Fprint(c.out, clearScreen)
		case n > 0:
			fmt.Fprintln(c.out)
		}
		if _, err := io.WriteString(c.out, terminalText(view.String())); err != nil {
			return err
		}
	}
	return nil
}

// printWatch prints one view of ctl watch: the time, each project's
// counts, and the unfinished tasks.
func printWatch(w io.Writer, o models.Overview, ts []models.Task, project string, now time.Time) {
	scope := "all projects"
	if project != "" {
		scope = "project " + project
	}
	fmt.Fprintf(w, "agentqueued watch: %s, %s\n", clean(scope), now.UTC().Format(time.RFC3339))
	for _, p := range o.Projects {
		if project == "" || p.ID == project {
			fmt.Fprintf(w, "  %s: %s\n", clean(p.ID), models.StatusCounts(o.Counts[p.ID]))
		}
	}
	fmt.Fprintf(w, "\nUnfinished tasks (%d):\n", len(ts))
	if len(ts) > 0 {
		printTasks(w, ts)
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
