package models

import "time"

// StatsWindow is how far back Stats looks for completions, queue waits and
// run times.
const StatsWindow = 24 * time.Hour

// Stats is the queue's throughput at a glance, per project.
type Stats struct {
	// At is when the figures were read; the window is the StatsWindow
	// before it.
	At time.Time `json:"at"`
	// Projects holds one entry per project, in id order.
	Projects []ProjectStats `json:"projects"`
}

// ProjectStats is one project's figures.
type ProjectStats struct {
	ProjectID string `json:"project_id"`
	// ByStatus counts the project's tasks in the working tables by status
	// (statuses with none are left out).
	ByStatus map[TaskStatus]int `json:"by_status"`
	// Archived counts the project's archived tasks.
	Archived int `json:"archived"`
	// CompletionsPerHour has one entry per hour of the window, oldest
	// first, the last being the hour now in progress.
	CompletionsPerHour []HourCount `json:"completions_per_hour"`
	// Completed is the sum of CompletionsPerHour.
	Completed int `json:"completed"`
	// MeanQueueWaitSeconds is the mean time work runs started in the window
	// waited from their task's last READY to their start; 0 with no such runs.
	MeanQueueWaitSeconds float64 `json:"mean_queue_wait_seconds"`
	// MeanRunSeconds is the mean duration of the work runs that ended in
	// the window; 0 with none.
	MeanRunSeconds float64 `json:"mean_run_seconds"`
	// RunsStarted and RunsEnded count the runs behind the two means.
	RunsStarted int `json:"runs_started"`
	RunsEnded   int `json:"runs_ended"`
}

// HourCount is a count of one hour, named by the hour's start (UTC).
type HourCount struct {
	Hour  time.Time `json:"hour"`
	Count int       `json:"count"`
}
