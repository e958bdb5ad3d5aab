package landing

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
)

// prBatch is how many pull requests one pass of the watcher checks.
const prBatch = 50

// openPR opens the pull request of a verified task and moves it to
// AWAITING_APPROVAL (PR_CREATED). When the task cannot have one, a task
// that requires approval is left to wait for a person without it: openPR
// returns why there is none, and the caller parks it. Any other task is
// blocked (PR_UNAVAILABLE). It returns "" when it decided the task.
func (l *Lander) openPR(ctx context.Context, p models.Project, t models.Task, v models.Verification, checks string) string {
	sctx := context.WithoutCancel(ctx)
	unavailable := func(why string) string {
		if t.RequiresApproval {
			return why
		}
		l.apply(sctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventPRUnavailable, ExpectFrom: models.StatusVerifying,
			Actor: "system", Reason: why})
		return ""
	}
	if l.cfg.PullRequests == nil {
		return unavailable("the task must land through a pull request (the project's pr_mode is always), but no GitHub is configured " +
			"(set github.token, or set the project's pr_mode to when_required or never, and restart the task)")
	}
	// A pull request of this task decided while the task ran again (merged
	// or closed during a rerun) stands: the person's decision wins.
	if prev, ok, err := l.store.PullRequestOf(sctx, t.ID); err == nil && ok && prev.State != models.PROpen {
		l.decided(sctx, p, t, prev)
		return ""
	}
	content := models.PRContent{Checks: checks}
	if res, ok, err := l.store.TaskResult(sctx, t.ID); err == nil && ok {
		content.Summary, content.Files = res.Summary, res.FilesChanged
	}
	pr, err := l.cfg.PullRequests.Open(ctx, p, t, v.Source, content)
	if err != nil {
		switch {
		case refused(l.log.With("task_id", t.ID), "pull request", err):
			// Left as recorded: a later verification opens it.
		case models.ErrorCodeOf(err) == models.CodeInvalid:
			return unavailable(models.RedactURL(err.Error()))
		case ctx.Err() == nil:
			l.verifyFailed(sctx, t, v, "open the pull request", err, nil)
		}
		return ""
	}
	if pr.Number == 0 {
		l.apply(sctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventVerifyPassed, ExpectFrom: models.StatusVerifying,
			Actor: "system", Reason: checks + "; nothing to review: the default branch contains the work already"})
		return ""
	}
	pr.NextCheckAt = l.cfg.Clock.Now().Add(l.prSpread(pr))
	if _, err := l.store.SavePullRequest(sctx, pr); err != nil {
		l.log.Error("record pull request", "task_id", t.ID, "pr", pr.URL, "err", err)
		return "" // the verification runs again and finds the pull request open
	}
	l.apply(sctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventPRCreated, ExpectFrom: models.StatusVerifying,
		Actor: "system", Reason: "pull request " + pr.URL})
	l.pokePRs()
	return ""
}

// prInterval is the time between two checks of one pull request.
func (l *Lander) prInterval() time.Duration {
	if l.cfg.PRPollInterval > 0 {
		return l.cfg.PRPollInterval
	}
	return DefaultPRPollInterval
}

// prSpread is a pull request's offset within the poll interval, so that
// many pull requests are checked spread over it rather than together.
func (l *Lander) prSpread(pr models.PullRequest) time.Duration {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s#%d", pr.Owner, pr.Repo, pr.Number)
	return time.Duration(h.Sum64() % uint64(l.prInterval()))
}

// PRSpread is a pull request's offset within the poll interval: its
// checks are due at that offset, so that many pull requests are checked
// spread over the interval.
func (l *Lander) PRSpread(pr models.PullRequest) time.Duration { return l.prSpread(pr) }

// WakeWatcher makes the pull request watcher look at the due pull
// requests now (a clock moved, a pull request was recorded).
func (l *Lander) WakeWatcher() { l.pokePRs() }

func (l *Lander) pokePRs() {
	select {
	case l.prPoke <- struct{}{}:
	default:
	}
}

// PokePullRequest makes the watcher check owner/repo#number now (a webhook
// said it changed). Pull requests no task lands through are ignored.
func (l *Lander) PokePullRequest(ctx context.Context, owner, repo string, number int) {
	ok, err := l.store.PokePullRequest(ctx, owner, repo, number, l.cfg.Clock.Now())
	if err != nil {
		l.log.Warn("poke pull request", "owner", owner, "repo", repo, "number", number, "err", err)
		return
	}
	if ok {
		l.pokePRs()
	}
}

// WatchPullRequests checks open pull requests until ctx ends: each one
// every PRPollInterval (spread over it), sooner when poked. A merge
// completes the task, a close without merge blocks it, and changes
// requested in a review run it again with the review as feedback when its
// project asks for that. Rate limits stop all checks until GitHub's reset.
func (l *Lander) WatchPullRequests(ctx context.Context) error {
	if l.cfg.PullRequests == nil {
		<-ctx.Done()
		return nil
	}
	var blockedUntil time.Time
	for {
		now := l.cfg.Clock.Now()
		var wait time.Duration
		if now.Before(blockedUntil) {
			wait = blockedUntil.Sub(now)
		} else {
			wait, blockedUntil = l.checkDuePRs(ctx, now)
		}
		// An absolute deadline: time that passed during the pass counts.
		deadline := now.Add(wait)
		select {
		case <-ctx.Done():
			return nil
		case <-l.prPoke:
		case <-l.cfg.Clock.After(max(deadline.Sub(l.cfg.Clock.Now()), 0)):
		}
	}
}

// checkDuePRs checks the pull requests due at now and returns how long to
// wait before the next pass, and until when GitHub asked to be left alone.
func (l *Lander) checkDuePRs(ctx context.Context, now time.Time) (time.Duration, time.Time) {
	due, soonest, err := l.store.DuePullRequests(ctx, now, prBatch)
	if err != nil {
		if ctx.Err() == nil {
			l.log.Warn("read due pull requests", "err", err)
		}
		return l.prInterval(), time.Time{}
	}
	for _, pr := range due {
		if ctx.Err() != nil {
			return 0, time.Time{}
		}
		err := l.checkPR(ctx, pr, now)
		if l.cfg.OnPRCheck != nil {
			l.cfg.OnPRCheck(pr, err)
		}
		if err != nil {
			var rl interface{ RetryAt() time.Time }
			if errors.As(err, &rl) {
				l.log.Warn("github rate limit: pull request checks wait", "until", rl.RetryAt(), "err", err)
				// A reset already past (clocks apart, or none given) still
				// waits a minute.
				until := rl.RetryAt()
				if floor := l.cfg.Clock.Now().Add(time.Minute); until.Before(floor) {
					until = floor
				}
				return until.Sub(l.cfg.Clock.Now()), until
			}
			l.log.Warn("check pull request", "task_id", pr.TaskID, "pr", pr.URL, "err", err)
			pr.NextCheckAt = now.Add(l.prInterval())
			if err := l.store.RecordPullRequestCheck(context.WithoutCancel(ctx), pr); err != nil {
				l.log.Warn("record pull request check", "pr", pr.URL, "err", err)
			}
		}
	}
	if len(due) == prBatch {
		return 0, time.Time{}
	}
	wait := l.prInterval()
	if !soonest.IsZero() {
		wait = min(wait, max(soonest.Sub(now), 0))
	}
	return wait, time.Time{}
}

// checkPR checks one pull request and applies what it found.
func (l *Lander) checkPR(ctx context.Context, pr models.PullRequest, now time.Time) error {
	p, err := l.store.GetProject(ctx, pr.ProjectID)
	if err != nil {
		return err
	}
	c, err := l.cfg.PullRequests.Check(ctx, pr, p.Settings.ReopenOnChangesRequested)
	if err != nil {
		return err
	}
	sctx := context.WithoutCancel(ctx)
	switch {
	case c.State == models.PRMerged, c.State == models.PRClosed:
		// A task not waiting for its pull request now (it runs again) meets
		// the decision when it next opens one (openPR).
		t, err := l.store.GetTask(sctx, pr.TaskID)
		if err != nil {
			return err
		}
		if t.Status == models.StatusAwaitingApproval {
			pr.State = c.State
			l.decided(sctx, p, t, pr)
		}
	case len(c.ChangesRequested) > 0 && p.Settings.ReopenOnChangesRequested:
		var texts, who []string
		for _, f := range c.ChangesRequested {
			who = append(who, f.Source)
			if f.Text != "" {
				texts = append(texts, f.Source+": "+f.Text)
			}
		}
		text := strings.Join(texts, "\n\n")
		if text == "" {
			text = "changes were requested on " + pr.URL
		}
		l.apply(sctx, models.TransitionRequest{TaskID: pr.TaskID, Event: models.EventAdminRestart,
			ExpectFrom: models.StatusAwaitingApproval, Actor: who[len(who)-1],
			Reason:   "changes requested on " + pr.URL,
			Feedback: &models.Feedback{Source: strings.Join(who, ", "), Verdict: models.VerdictReject, Text: text}})
	}
	pr.State, pr.ETag, pr.ReviewsETag, pr.LastReviewID = c.State, c.ETag, c.ReviewsETag, c.LastReviewID
	pr.NextCheckAt = now.Add(l.prInterval())
	return l.store.RecordPullRequestCheck(sctx, pr)
}

// decided applies a decision taken on GitHub to a task waiting for it (or
// still VERIFYING, whose pull request was decided while it ran again):
// merged completes it, closed blocks it.
func (l *Lander) decided(ctx context.Context, p models.Project, t models.Task, pr models.PullRequest) {
	if t.Status == models.StatusVerifying {
		l.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventPRCreated, ExpectFrom: models.StatusVerifying,
			Actor: "system", Reason: "pull request " + pr.URL})
	}
	if pr.State == models.PRMerged {
		res, err := l.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventPRMerged,
			ExpectFrom: models.StatusAwaitingApproval, Actor: "github", Reason: "pull request merged: " + pr.URL})
		if err != nil {
			l.log.Warn("transition not applied", "task_id", t.ID, "event", models.EventPRMerged, "err", err)
			return
		}
		if !res.Duplicate {
			l.log.Info("task transition", "task_id", t.ID, "event", models.EventPRMerged, "from", res.From, "to", res.To)
			l.afterMerge(ctx, p, pr)
		}
		return
	}
	l.apply(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventPRClosed,
		ExpectFrom: models.StatusAwaitingApproval, Actor: "github", Reason: "pull request closed without merge: " + pr.URL})
}

// afterMerge deletes a merged pull request's branch and the task's
// checkouts of it.
func (l *Lander) afterMerge(ctx context.Context, p models.Project, pr models.PullRequest) {
	if err := l.cfg.PullRequests.DeleteBranch(ctx, pr); err != nil {
		l.log.Warn("delete merged branch", "task_id", pr.TaskID, "pr", pr.URL, "err", err)
	}
	t, err := l.store.GetTask(ctx, pr.TaskID)
	if err != nil {
		return
	}
	src := ""
	if run, ok, err := l.store.LastWorkRun(ctx, t.ID); err == nil && ok {
		src = run.CheckoutPath
	}
	if err := l.ws.Cleanup(ctx, p, t, src, true); err != nil {
		l.log.Warn("clean up after merge", "task_id", t.ID, "err", err)
	}
}

// approvePR answers a person's approval of a task waiting for its pull
// request: merged through the API when the project allows it, else a
// conflict saying to merge on GitHub.
func (l *Lander) approvePR(ctx context.Context, t models.Task, actor string) (models.TransitionResult, error) {
	p, err := l.store.GetProject(ctx, t.ProjectID)
	if err != nil {
		return models.TransitionResult{}, err
	}
	pr, ok, err := l.store.PullRequestOf(ctx, t.ID)
	if err != nil {
		return models.TransitionResult{}, err
	}
	if !p.Settings.MergeFromChat || l.cfg.PullRequests == nil || !ok {
		return models.TransitionResult{}, models.Errorf(models.CodeConflict,
			"task %s waits for its pull request %s: merge it on GitHub (or set merge_from_chat in the project's settings)", t.ID, *t.PRURL)
	}
	if err := l.store.WaitDurable(ctx); err != nil { // the merge acts on what was read
		return models.TransitionResult{}, err
	}
	if err := l.cfg.PullRequests.Merge(ctx, pr); err != nil {
		return models.TransitionResult{}, err
	}
	res, err := l.store.ApplyEvent(ctx, models.TransitionRequest{TaskID: t.ID, Event: models.EventPRMerged,
		ExpectFrom: models.StatusAwaitingApproval, Actor: actor, Reason: "pull request merged through the API by " + actor + ": " + pr.URL})
	if err != nil {
		return res, err
	}
	pr.State, pr.NextCheckAt = models.PRMerged, l.cfg.Clock.Now()
	if err := l.store.RecordPullRequestCheck(ctx, pr); err != nil {
		l.log.Warn("record merged pull request", "pr", pr.URL, "err", err)
	}
	l.afterMerge(context.WithoutCancel(ctx), p, pr)
	return res, nil
}
