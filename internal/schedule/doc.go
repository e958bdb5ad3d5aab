// Package schedule computes the times of schedules — every interval from
// an anchor, or a cron expression on its time zone's wall clock — and which
// time is due after downtime: hooks and workflows fire once per scheduled
// time, and once for the latest of the times they missed.
package schedule
