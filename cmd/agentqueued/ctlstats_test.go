package main

import (
	"encoding/json"
	"os/user"
	"testing"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// TestMeansAreRoundedForPeople: ctl stats printed a sub-second mean to the
// nanosecond (123.456789ms); every mean is rounded to what a person reads.
func TestMeansAreRoundedForPeople(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		seconds float64
		samples int
		want    string
	}{
		{0, 0, "-"},
		{0.123456789, 3, "123ms"},
		{0.000123456, 1, "123µs"},
		{2.345678, 2, "2.3s"},
		{125.6, 1, "2m6s"},
	} {
		if got := meanOf(tc.seconds, tc.samples); got != tc.want {
			t.Errorf("meanOf(%v, %d) = %q, want %q", tc.seconds, tc.samples, got, tc.want)
		}
	}
}

// TestCreatedByFallsBackToTheAccount: with no $USER (a service, a
// container), ctl recorded "-" as a task's creator; it records the
// account's name.
func TestCreatedByFallsBackToTheAccount(t *testing.T) {
	t.Parallel()
	u, err := user.Current()
	if err != nil || u.Username == "" {
		t.Skipf("this machine names no account: %v", err)
	}
	d := startDaemon(t, t.TempDir())
	addr := d.m.Addr()
	mustCtl(t, addr, "project", "create", "web")
	r := runCtl(t, addr, map[string]string{}, "--json", "task", "add", "--project", "web", "--title", "Mine")
	if r.code != 0 {
		t.Fatalf("task add: %s", r.stderr)
	}
	var res api.BatchResponse
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Results) != 1 {
		t.Fatalf("task add: %v %s", err, r.stdout)
	}
	var td models.TaskDetail
	if err := json.Unmarshal([]byte(mustCtl(t, addr, "--json", "task", "show", res.Results[0].TaskID)), &td); err != nil {
		t.Fatal(err)
	}
	if td.Task.CreatedBy != u.Username {
		t.Fatalf("created by %q, want the account's name %q", td.Task.CreatedBy, u.Username)
	}
}
