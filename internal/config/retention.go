package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults of the retention section.
const (
	// DefaultRetentionInterval is the default of retention.interval: how
	// often the pruner looks for what has outlived its window.
	DefaultRetentionInterval = 10 * time.Minute
	// DefaultRetentionNotices is the default of retention.notices: how long
	// a delivered (or given-up) notice is kept.
	DefaultRetentionNotices = 7 * 24 * time.Hour
	// DefaultRetentionRunLogs is the default of retention.run_logs: how long
	// an ended attempt's log, prompt and state files are kept on disk.
	DefaultRetentionRunLogs = 7 * 24 * time.Hour
	// DefaultRetentionHookRuns is the default of retention.hook_runs.
	DefaultRetentionHookRuns = 30 * 24 * time.Hour
	// DefaultRetentionWorkflowRuns is the default of retention.workflow_runs.
	DefaultRetentionWorkflowRuns = 30 * 24 * time.Hour
	// DefaultRetentionArchiveTasks is the default of retention.archive_tasks:
	// a finished task is archived this long after its last change.
	DefaultRetentionArchiveTasks = 30 * 24 * time.Hour
	// DefaultRetentionArchived is the default of retention.archived: an
	// archived task is deleted for good this long after it was archived.
	DefaultRetentionArchived = 365 * 24 * time.Hour
	// DefaultRetentionBatch is the default of retention.batch: the tasks
	// one archive transaction moves (the other steps delete
	// retention.RowsPerTask times as many rows per transaction).
	DefaultRetentionBatch = 5
	// MaxRetentionBatch caps retention.batch, so that no pruning
	// transaction holds the writer long.
	MaxRetentionBatch = 5000
)

// RetentionConfig says how long history is kept. A window of zero keeps
// that kind of history for ever.
type RetentionConfig struct {
	// Interval is how often the pruner runs.
	Interval time.Duration
	// Notices is how long delivered or given-up outbox notices are kept.
	Notices time.Duration
	// RunLogs is how long the files of an ended attempt are kept.
	RunLogs time.Duration
	// HookRuns is how long finished hook runs are kept.
	HookRuns time.Duration
	// WorkflowRuns is how long ended workflow runs are kept.
	WorkflowRuns time.Duration
	// ArchiveTasks is how long a finished task stays in the working tables
	// before it is archived.
	ArchiveTasks time.Duration
	// Archived is how long an archived task is kept in the archive.
	Archived time.Duration
	// Batch caps the tasks of one archive transaction (see
	// DefaultRetentionBatch).
	Batch int
}

type fileRetention struct {
	Interval     string `yaml:"interval"`
	Notices      string `yaml:"notices"`
	RunLogs      string `yaml:"run_logs"`
	HookRuns     string `yaml:"hook_runs"`
	WorkflowRuns string `yaml:"workflow_runs"`
	ArchiveTasks string `yaml:"archive_tasks"`
	Archived     string `yaml:"archived"`
	Batch        string `yaml:"batch"`
}

// DefaultRetention returns the retention section's defaults.
func DefaultRetention() RetentionConfig {
	return RetentionConfig{
		Interval: DefaultRetentionInterval, Notices: DefaultRetentionNotices, RunLogs: DefaultRetentionRunLogs,
		HookRuns: DefaultRetentionHookRuns, WorkflowRuns: DefaultRetentionWorkflowRuns,
		ArchiveTasks: DefaultRetentionArchiveTasks, Archived: DefaultRetentionArchived, Batch: DefaultRetentionBatch,
	}
}

// parseWindow reads a retention window: a Go duration ("36h") or a whole
// number of days ("7d"); "0" keeps for ever.
func parseWindow(key, v string) (time.Duration, error) {
	bad := fmt.Errorf("%s: %q is not a retention window (use e.g. 7d, 36h, or 0 to keep for ever)", key, v)
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100*365 {
			return 0, bad
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, bad
	}
	return d, nil
}

func (c *Config) overlayRetention(f fileRetention) error {
	r := &c.Retention
	for _, w := range []struct {
		key, v string
		dst    *time.Duration
	}{
		{"retention.notices", f.Notices, &r.Notices}, {"retention.run_logs", f.RunLogs, &r.RunLogs},
		{"retention.hook_runs", f.HookRuns, &r.HookRuns}, {"retention.workflow_runs", f.WorkflowRuns, &r.WorkflowRuns},
		{"retention.archive_tasks", f.ArchiveTasks, &r.ArchiveTasks}, {"retention.archived", f.Archived, &r.Archived},
	} {
		if w.v == "" {
			continue
		}
		d, err := parseWindow(w.key, w.v)
		if err != nil {
			return err
		}
		*w.dst = d
	}
	if err := parseDuration("retention.interval", f.Interval, &r.Interval); err != nil {
		return err
	}
	if f.Batch != "" {
		n, err := strconv.Atoi(f.Batch)
		if err != nil || n < 1 || n > MaxRetentionBatch {
			return fmt.Errorf("retention.batch: %q is not a number of tasks from 1 to %d", f.Batch, MaxRetentionBatch)
		}
		r.Batch = n
	}
	return nil
}
