package models

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"
	"time"
)

// RunnerState is whether a runner takes new work.
type RunnerState string

// The runner states (docs/runners.md, "The registry").
const (
	// RunnerActive takes new runs for its agents.
	RunnerActive RunnerState = "ACTIVE"
	// RunnerDraining takes no new run; the runs it holds go on to their end.
	RunnerDraining RunnerState = "DRAINING"
)

// RunnerStates lists every runner state.
var RunnerStates = []RunnerState{RunnerActive, RunnerDraining}

// Valid reports whether s is a known runner state.
func (s RunnerState) Valid() bool { return slices.Contains(RunnerStates, s) }

// Limits of a runner's registration.
const (
	// MaxRunnerLabels caps a runner's labels.
	MaxRunnerLabels = 20
	// MaxRunnerCapacity caps a runner's capacity (runs held at once).
	MaxRunnerCapacity = 1000
)

// RunnerTokenPrefix starts every runner token, so that one is recognised
// at a glance (and by secret scanners) and never taken for the API's
// token or a run's.
const RunnerTokenPrefix = "aqr_"

// Runner is an agentqueued runner: a process on another machine that holds
// agents and their checkouts and connects out to the daemon with its token
// (docs/runners.md). Only the token's hash is stored; it is never part of a
// Runner.
type Runner struct {
	// Name is the runner's id (ValidID); its agents are named NAME/AGENT.
	Name string `json:"name"`
	// Labels describe the machine (gpu, arm64, …); never null in answers.
	Labels []string `json:"labels"`
	// Capacity is the most runs the runner holds at once; 0 is as many as
	// it has agents.
	Capacity int         `json:"capacity"`
	State    RunnerState `json:"state"`
	// CreatedAt is when it was added.
	CreatedAt time.Time `json:"created_at"`
	// LastSeenAt is when it last made a request; nil before its first.
	LastSeenAt *time.Time `json:"last_seen_at,omitempty"`
	// Version and Address are those it last connected with.
	Version string `json:"version,omitempty"`
	Address string `json:"address,omitempty"`
	// Agents are the names of the runner's agents, in order; never null
	// in answers.
	Agents []string `json:"agents"`
	// Connected reports that the runner has a request outstanding or made
	// one lately (derived from the daemon's connections, never stored).
	Connected bool `json:"connected"`
	// RunsInProgress counts its agents' runs not yet ended (derived from
	// the runs, never stored).
	RunsInProgress int `json:"runs_in_progress"`
}

// ApplyDefaults fills unset fields: an ACTIVE runner, empty lists.
func (r *Runner) ApplyDefaults() {
	if r.State == "" {
		r.State = RunnerActive
	}
	if r.Labels == nil {
		r.Labels = []string{}
	}
	if r.Agents == nil {
		r.Agents = []string{}
	}
}

// Validate checks a runner's registration: its name an id, at most
// MaxRunnerLabels labels, each an id given once, a capacity from 0 to
// MaxRunnerCapacity and a known state.
func (r *Runner) Validate() error {
	if !ValidID(r.Name) {
		return Errorf(CodeInvalid, "name: runner name %s: use 1-64 lower-case letters, digits, '-' or '_'", Quote(r.Name))
	}
	if len(r.Labels) > MaxRunnerLabels {
		return Errorf(CodeInvalid, "labels: at most %d (got %d)", MaxRunnerLabels, len(r.Labels))
	}
	for i, l := range r.Labels {
		at := "labels[" + strconv.Itoa(i) + "]"
		switch {
		case !ValidID(l):
			return Errorf(CodeInvalid, "%s: label %s: use 1-64 lower-case letters, digits, '-' or '_'", at, Quote(l))
		case slices.Contains(r.Labels[:i], l):
			return Errorf(CodeInvalid, "%s: %s is given twice", at, l)
		}
	}
	switch {
	case r.Capacity < 0 || r.Capacity > MaxRunnerCapacity:
		return Errorf(CodeInvalid, "capacity: must be from 0 (as many runs as it has agents) to %d (got %d)",
			MaxRunnerCapacity, r.Capacity)
	case !r.State.Valid():
		return Errorf(CodeInvalid, "state: unknown runner state %s", Quote(string(r.State)))
	}
	return nil
}

// RunnerTokenHash is what the daemon stores of a runner's token, and
// looks a presented token up by: the hex SHA-256 of the token.
func RunnerTokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
