package landing

import (
	"context"
	"slices"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// This file lands waiting landings by themselves: while a landing waits
// for a LINK repository's working tree, the watcher checks that tree and
// lands the project's waiting work once nothing holds it.

// maxLandBackoff bounds how long the watcher leaves a project alone whose
// working tree looked clean but whose landing still waited (git refused to
// update the tree: an untracked file the merge would overwrite).
const maxLandBackoff = time.Minute

// WatchLandings lands waiting landings by themselves, until ctx ends.
// While a task's landing waits (verification phase landing), every
// LandPollInterval it checks the working tree of each such project as
// Deliver would, without fetching or merging anything (LandingHeld: `git
// status` in the user's tree), and once nothing holds the landing it does
// what Land does for the project. A tree with local changes is never
// touched. With no landing waiting it costs nothing: it waits until one
// starts waiting.
func (l *Lander) WatchLandings(ctx context.Context) error {
	// retry holds, per project, when to try again a landing that still
	// waited although its tree looked clean, and the wait before that.
	retry := map[string]landRetry{}
	for {
		projects, err := l.waitingProjects(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			l.log.Warn("list waiting landings", "err", err)
		}
		if err == nil && len(projects) == 0 {
			clear(retry)
			select {
			case <-ctx.Done():
				return nil
			case <-l.landPoke:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-l.cfg.Clock.After(l.cfg.LandPollInterval):
		}
		for _, id := range projects {
			if ctx.Err() != nil {
				return nil
			}
			l.landWhenClean(ctx, id, retry)
		}
	}
}

// landRetry is when the watcher tries a project's landings again after
// they still waited with a clean tree.
type landRetry struct {
	at   time.Time
	wait time.Duration
}

// pokeLandings wakes the landing watcher: a landing started waiting.
func (l *Lander) pokeLandings() {
	select {
	case l.landPoke <- struct{}{}:
	default:
	}
}

// waitingProjects lists the projects with a waiting landing, in the order
// of their oldest.
func (l *Lander) waitingProjects(ctx context.Context) ([]string, error) {
	vs, err := l.store.Verifications(ctx, models.PhaseLanding)
	if err != nil {
		return nil, err
	}
	var projects []string
	for _, v := range vs {
		t, err := l.store.GetTask(ctx, v.TaskID)
		if err != nil {
			continue // deleted meanwhile
		}
		if !slices.Contains(projects, t.ProjectID) {
			projects = append(projects, t.ProjectID)
		}
	}
	return projects, nil
}

// landWhenClean lands the waiting landings of project id when its working
// tree no longer holds them, and logs what it did. A project whose tree
// could not be checked, or whose landing still waited with a clean tree,
// is left alone for a while, longer each time (up to maxLandBackoff).
func (l *Lander) landWhenClean(ctx context.Context, id string, retry map[string]landRetry) {
	now := l.cfg.Clock.Now()
	if r, ok := retry[id]; ok && now.Before(r.at) {
		return
	}
	later := func() time.Duration {
		r := retry[id]
		r.wait = min(max(2*r.wait, l.cfg.LandPollInterval), maxLandBackoff)
		r.at = now.Add(r.wait)
		retry[id] = r
		return r.wait
	}
	log := l.log.With("project_id", id)
	p, err := l.store.GetProject(ctx, id)
	if err != nil {
		return // deleted meanwhile
	}
	held, err := l.ws.LandingHeld(ctx, p)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("check the working tree of a waiting landing", "retry_in", later(), "err", err)
		}
		return
	}
	if held != "" {
		delete(retry, id)
		return
	}
	res, err := l.Land(ctx, id)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("land waiting landings", "retry_in", later(), "err", err)
		}
		return
	}
	for _, t := range res.Landed {
		log.Info("waiting landing landed: the working tree is clean", "task_id", t.TaskID, "status", t.Status, "reason", t.Reason)
	}
	for _, t := range res.Failed {
		log.Info("waiting landing failed", "task_id", t.TaskID, "status", t.Status, "files", t.Files, "reason", t.Reason)
	}
	if len(res.Waiting) == 0 {
		delete(retry, id)
		return
	}
	log.Info("waiting landing still waits although the working tree looks clean", "retry_in", later(),
		"task_id", res.Waiting[0].TaskID, "reason", res.Waiting[0].Reason)
}
