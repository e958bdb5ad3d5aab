package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/config"
)

// TestRetention: the retention section takes days or durations, zero keeps
// for ever, missing keys keep their named defaults, and a bad value is
// refused naming its key.
func TestRetention(t *testing.T) {
	t.Parallel()
	defaults := config.RetentionConfig{
		Interval: config.DefaultRetentionInterval, Notices: config.DefaultRetentionNotices,
		RunLogs: config.DefaultRetentionRunLogs, HookRuns: config.DefaultRetentionHookRuns,
		WorkflowRuns: config.DefaultRetentionWorkflowRuns, ArchiveTasks: config.DefaultRetentionArchiveTasks,
		Archived: config.DefaultRetentionArchived, Batch: config.DefaultRetentionBatch,
	}
	day := 24 * time.Hour
	tests := []struct {
		name, yaml string
		want       func(r *config.RetentionConfig)
		wantErr    []string
	}{
		{name: "defaults", yaml: "data_dir: /tmp/x\n", want: func(*config.RetentionConfig) {}},
		{name: "days and durations", yaml: "retention:\n  notices: 3d\n  run_logs: 36h\n  hook_runs: 1d\n" +
			"  workflow_runs: 2d\n  archive_tasks: 90d\n  archived: 730d\n  interval: 1m\n  batch: 50\n",
			want: func(r *config.RetentionConfig) {
				r.Notices, r.RunLogs, r.HookRuns, r.WorkflowRuns, r.ArchiveTasks = 3*day, 36*time.Hour, day, 2*day, 90*day
				r.Archived = 730 * day
				r.Interval, r.Batch = time.Minute, 50
			}},
		{name: "zero keeps for ever", yaml: "retention:\n  archive_tasks: 0\n  notices: 0d\n",
			want: func(r *config.RetentionConfig) { r.ArchiveTasks, r.Notices = 0, 0 }},
		{name: "not a window", yaml: "retention:\n  archive_tasks: soon\n", wantErr: []string{"retention.archive_tasks", "soon"}},
		{name: "negative", yaml: "retention:\n  notices: -1d\n", wantErr: []string{"retention.notices", "-1d"}},
		{name: "negative duration", yaml: "retention:\n  run_logs: -5h\n", wantErr: []string{"retention.run_logs"}},
		{name: "zero interval", yaml: "retention:\n  interval: 0s\n", wantErr: []string{"retention.interval"}},
		{name: "batch too big", yaml: "retention:\n  batch: 100000\n", wantErr: []string{"retention.batch", "100000"}},
		{name: "batch zero", yaml: "retention:\n  batch: 0\n", wantErr: []string{"retention.batch"}},
		{name: "unknown key", yaml: "retention:\n  events: 1d\n", wantErr: []string{"events"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := config.Parse([]byte(tt.yaml), func(string) (string, bool) { return "", false })
			if err == nil {
				err = cfg.Validate()
			}
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatal("accepted")
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := defaults
			tt.want(&want)
			if cfg.Retention != want {
				t.Errorf("retention %+v, want %+v", cfg.Retention, want)
			}
		})
	}
}
