package service

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/agentqueued/agentqueued/internal/fleet"
	"github.com/agentqueued/agentqueued/internal/models"
)

// This file holds the service's runner operations (docs/runners.md, "The
// registry"): adding a runner issues its token, which is answered once and
// never stored (the store keeps its hash); the rest are the store's.

// runnerTokenBytes is the randomness of a runner's token: 256 bits.
const runnerTokenBytes = 32

// newRunnerToken returns a new runner token: models.RunnerTokenPrefix and
// 32 random bytes in base64url without padding (43 characters).
func newRunnerToken() (string, error) {
	var b [runnerTokenBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("runner token: %w", err)
	}
	return models.RunnerTokenPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// AddRunner registers a runner, ACTIVE, and returns it with its token:
// the only time the token is seen, since the store keeps only its hash
// (models.RunnerTokenHash).
func (s *Service) AddRunner(ctx context.Context, name string, labels []string, capacity int) (models.Runner, string, error) {
	token, err := newRunnerToken()
	if err != nil {
		return models.Runner{}, "", err
	}
	r, err := s.store.CreateRunner(ctx, models.Runner{Name: name, Labels: labels, Capacity: capacity},
		models.RunnerTokenHash(token))
	if err != nil {
		return models.Runner{}, "", err
	}
	return r, token, nil
}

// ListRunners lists the runners with their agents, by name (the store's),
// each with whether it is connected now, when it was last seen and its
// runs in progress (live).
func (s *Service) ListRunners(ctx context.Context) ([]models.Runner, error) {
	rs, err := s.store.ListRunners(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.live(ctx, rs); err != nil {
		return nil, fmt.Errorf("list runners: %w", err)
	}
	return rs, nil
}

// live fills in what the database's rows do not say of each runner:
// whether it is connected now, and its last request when the daemon's
// connections saw one later than the database holds (a polling runner's
// is written down at most once a minute), from the connections; its runs
// in progress (its agents' open runs) from the store.
func (s *Service) live(ctx context.Context, rs []models.Runner) error {
	if len(rs) == 0 {
		return nil
	}
	runs, err := s.store.OpenRunsByRunner(ctx)
	if err != nil {
		return err
	}
	conns := map[string]fleet.Status{}
	if s.runners != nil {
		for _, st := range s.runners.Statuses() {
			conns[st.Name] = st
		}
	}
	for i := range rs {
		r := &rs[i]
		r.RunsInProgress = runs[r.Name]
		c := conns[r.Name]
		r.Connected = c.Connected
		if !c.LastSeen.IsZero() && (r.LastSeenAt == nil || c.LastSeen.After(*r.LastSeenAt)) {
			seen := c.LastSeen.UTC()
			r.LastSeenAt = &seen
		}
	}
	return nil
}

// GetRunner returns one runner with its agents (the store's), whether it
// is connected now, when it was last seen and its runs in progress
// (live).
func (s *Service) GetRunner(ctx context.Context, name string) (models.Runner, error) {
	r, err := s.store.GetRunner(ctx, name)
	if err != nil {
		return models.Runner{}, err
	}
	one := []models.Runner{r}
	if err := s.live(ctx, one); err != nil {
		return models.Runner{}, fmt.Errorf("get runner %s: %w", name, err)
	}
	return one[0], nil
}

// DrainRunner makes a runner DRAINING: it is given no new run, and those
// it holds go on (the store's).
func (s *Service) DrainRunner(ctx context.Context, name string) (models.Runner, error) {
	return s.setRunnerState(ctx, name, models.RunnerDraining)
}

// setRunnerState sets a runner's state and wakes its held poll, whose
// answer carries the state.
func (s *Service) setRunnerState(ctx context.Context, name string, state models.RunnerState) (models.Runner, error) {
	r, err := s.store.SetRunnerState(ctx, name, state)
	if err == nil && s.runners != nil {
		s.runners.Wake(name)
	}
	return r, err
}

// ResumeRunner makes a draining runner ACTIVE again (the store's).
func (s *Service) ResumeRunner(ctx context.Context, name string) (models.Runner, error) {
	return s.setRunnerState(ctx, name, models.RunnerActive)
}

// RemoveRunner deletes a runner and its agents, refused while one of them
// runs something (the store's); its token stops working at once.
func (s *Service) RemoveRunner(ctx context.Context, name string) error {
	if err := s.store.RemoveRunner(ctx, name); err != nil {
		return err
	}
	if s.runners != nil {
		s.runners.Remove(name)
	}
	return nil
}

// RunnerByToken returns the runner a token names: not_found when none
// does (a wrong token, or its runner was removed).
func (s *Service) RunnerByToken(ctx context.Context, token string) (models.Runner, error) {
	return s.store.RunnerByTokenHash(ctx, models.RunnerTokenHash(token))
}

// RunnerHello records a runner's hello from address: when it was seen,
// its version, and its agents (RUNNER/NAME), whose ids it returns.
func (s *Service) RunnerHello(ctx context.Context, runner string, hello models.RunnerHello, address string) ([]string, error) {
	return s.store.HelloRunner(ctx, runner, hello, s.clock.Now(), address)
}

// TouchRunner records that a runner was seen now, with version, from
// address (the store's; no wait for a sync of the log).
func (s *Service) TouchRunner(ctx context.Context, name, version, address string) error {
	return s.store.TouchRunner(ctx, name, s.clock.Now(), version, address)
}
