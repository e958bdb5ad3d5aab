package repo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/agentqueued/agentqueued/internal/models"
)

// owner says what a repair may do to a repository.
type owner int

const (
	// ownIntegration is a repo's integration repository: all it holds
	// can be fetched again, so it is rebuilt.
	ownIntegration owner = iota
	// ownCheckout is an agent's clone under its checkout lock, before a
	// run: it is set aside and cloned again.
	ownCheckout
	// ownBusyCheckout is an agent's clone that a run may be using (Seal,
	// Stage, Deliver): whole packs get a new index; a damaged pack is
	// moved out of objects/pack and what the origin and the integration
	// repository hold is fetched into it again (see refill); unless that
	// leaves it whole, the clone is marked to be cloned again by the next
	// Prepare.
	ownBusyCheckout
	// ownHook is a hook checkout under its lock: it is removed and cloned
	// again.
	ownHook
	// ownOrigin is an INIT origin: the daemon made it, but it is the only
	// copy of the project's delivered work. Whole packs get a new index;
	// a lost pack is reported.
	ownOrigin
	// ownUser is the user's repository (LINK, a CLONE path): reported,
	// never changed.
	ownUser
)

// target is a repository a repair looks at.
type target struct {
	path string
	own  owner
}

// Names in a damaged repository's git directory.
const (
	// damagedMark marks a clone found damaged while a run could be using
	// it; the next Prepare clones it again.
	damagedMark = "aq-damaged"
	// quarantineDir holds the packs moved out of objects/pack.
	quarantineDir = "aq-damaged-packs"
)

// errDamagedMark is a Prepare of a clone marked damaged.
var errDamagedMark = errors.New("the checkout was found damaged")

// repaired is what a repair did.
type repaired struct {
	// any is true when something was mended: the operation may be tried
	// again.
	any bool
	// rescued names the branch holding uncommitted work rescued from a
	// checkout that was set aside.
	rescued string
}

// mayBeDamage reports whether a failed operation's error may come from a
// damaged repository: not a refusal the package made on purpose (a
// models.Error, a merge conflict), not a cancellation.
func mayBeDamage(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ce *models.ConflictError
	var me *models.Error
	return !errors.As(err, &ce) && !errors.As(err, &me)
}

// retryRepaired looks, after an operation failed with cause, for damaged
// packs in the repositories it used and repairs them as their owner
// allows; when something was mended it runs the operation again, once. A
// damage it cannot repair is returned with cause. rescued names a rescue
// branch made while a checkout was set aside.
func (w *Workspaces) retryRepaired(ctx context.Context, log *slog.Logger, r *models.RepoConfig, cause error, targets []target, again func() error) (rescued string, err error) {
	if !mayBeDamage(cause) {
		return "", cause
	}
	// A repair rebuilds, sets aside and removes repositories: an act like
	// any other.
	if err := w.fenced(ctx); err != nil {
		return "", errors.Join(err, cause)
	}
	var done repaired
	for _, tg := range targets {
		rep, err := w.repairOne(ctx, log, r, tg)
		done.any = done.any || rep.any
		if rep.rescued != "" {
			done.rescued = rep.rescued
		}
		if err != nil {
			return done.rescued, errors.Join(err, cause)
		}
	}
	if !done.any {
		return "", cause
	}
	log.Info("trying again after a repair", "cause", w.redact(r, cause.Error()))
	return done.rescued, again()
}

// redact removes from s the credentials of r's URL, should an error
// quote them.
func (w *Workspaces) redact(r *models.RepoConfig, s string) string {
	s = models.RedactURL(s)
	if w.cfg.Credentials == nil || r.URL == "" {
		return s
	}
	if _, secret, ok := w.cfg.Credentials(r.URL); ok && secret != "" {
		s = strings.ReplaceAll(s, secret, "<credentials>")
	}
	return s
}

// repairTargets lists the repositories an operation on repo r uses: the
// agent's checkout (idle when the caller holds its lock before a run),
// the integration repository, and the origin when it is on this machine.
// The user's go last: a damage there is reported after the daemon's own
// are mended.
func (w *Workspaces) repairTargets(r *models.RepoConfig, checkout string, idle bool) []target {
	var list []target
	if checkout != "" && r.SourceType != models.RepoLink {
		own := ownBusyCheckout
		if idle {
			own = ownCheckout
		}
		list = append(list, target{checkout, own})
	}
	list = append(list, target{w.integrationPath(r), ownIntegration})
	return append(list, w.originTargets(r)...)
}

// originTargets lists the origin of r when it is on this machine (none
// for a remote URL).
func (w *Workspaces) originTargets(r *models.RepoConfig) []target {
	switch {
	case r.SourceType == models.RepoInit:
		return []target{{w.initOriginPath(r), ownOrigin}}
	case r.SourceType == models.RepoLink:
		return []target{{r.SourcePath, ownUser}}
	case isLocal(r.URL):
		return []target{{localPath(r.URL), ownUser}}
	}
	return nil
}

// repairOne repairs the damaged packs of one repository as its owner
// allows. A pack whose index alone is damaged gets a new index; a damaged
// index without a pack is removed; a pack that is itself damaged is lost,
// and the repository is rebuilt (integration), set aside and cloned
// again (an idle checkout), removed (a hook checkout), refilled (a busy
// checkout) or reported (an INIT origin). The user's repository is only
// reported, with the command that repairs it.
func (w *Workspaces) repairOne(ctx context.Context, log *slog.Logger, r *models.RepoConfig, tg target) (repaired, error) {
	var done repaired
	if tg.path == "" {
		return done, nil
	}
	_, common, err := gitDirs(tg.path)
	if err != nil {
		return done, nil // no repository here: nothing of this kind to repair
	}
	list, err := damagedPacks(common)
	if err != nil {
		return done, fmt.Errorf("check the packs of %s: %w", tg.path, err)
	}
	if tg.own == ownUser {
		return done, userDamage(tg.path, list)
	}
	marked := tg.own == ownCheckout && isFile(filepath.Join(common, damagedMark))
	if len(list) == 0 && !marked {
		return done, nil
	}
	log = log.With("path", tg.path)
	var lost []packDamage
	for _, d := range list {
		switch {
		case d.pack == "":
			if err := os.Remove(d.idx); err != nil && !errors.Is(err, os.ErrNotExist) {
				return done, fmt.Errorf("repair %s: %w", tg.path, err)
			}
			log.Warn("repaired a damaged repository: removed an unreadable index without a pack", "file", d.name(), "problem", d.problem)
			done.any = true
		case d.whole:
			if err := reindexPack(d.pack); err != nil {
				return done, fmt.Errorf("repair %s: index %s again: %w", tg.path, d.name(), err)
			}
			log.Warn("repaired a damaged repository: indexed a whole pack again", "file", d.name(), "problem", d.problem)
			done.any = true
		default:
			lost = append(lost, d)
		}
	}
	if len(lost) == 0 && !marked {
		return done, nil
	}
	problem := describeDamage(lost)
	if problem == "" {
		problem = "marked damaged while in use"
	}
	switch tg.own {
	case ownIntegration:
		err = w.rebuildIntegration(ctx, log, r, tg.path, common, lost)
	case ownCheckout:
		done.rescued, err = w.rebuildCheckout(ctx, log, r, tg.path, common, lost)
	case ownHook:
		if err = os.RemoveAll(tg.path); err == nil {
			log.Warn("repaired a damaged repository: removed the hook checkout to clone it again", "problem", problem)
		}
	case ownBusyCheckout:
		err = w.refill(ctx, r, tg.path, common, lost)
		if err == nil {
			if _, ferr := w.git(ctx, tg.path, "fsck", "--connectivity-only", "--no-dangling", "--no-progress"); ferr == nil {
				log.Warn("repaired a damaged repository: moved the damaged pack out of a checkout and fetched its objects again",
					"problem", problem)
				break
			}
		}
		if merr := os.WriteFile(filepath.Join(common, damagedMark), []byte(problem+"\n"), 0o644); merr != nil {
			return done, fmt.Errorf("mark %s damaged: %w", tg.path, errors.Join(err, merr))
		}
		if err != nil {
			log.Warn("found a damaged checkout in use: it is cloned again before its next run", "problem", problem, "err", err)
			return done, fmt.Errorf("the checkout %s is damaged (%s): it is cloned again before its agent's next task: %w", tg.path, problem, err)
		}
		log.Warn("repaired a damaged repository in part: moved the damaged pack out of a checkout and fetched what its origin "+
			"and the integration repository hold; it is cloned again before its next run", "problem", problem)
	case ownOrigin:
		log.Error("found a damaged origin repository that cannot be rebuilt", "problem", problem)
		return done, models.Errorf(models.CodeConflict,
			"the repository %s, which agentqueued created for the project and which holds its delivered work, is damaged: "+
				"%s. It is not rebuilt: restore it from a backup, or move the damaged pack out of objects/pack and fetch "+
				"the objects `git -C %s fsck` names as missing from an agent's checkout", tg.path, problem, shellQuote(tg.path))
	}
	if err != nil {
		return done, fmt.Errorf("repair %s: %w", tg.path, err)
	}
	done.any = true
	return done, nil
}

// describeDamage joins the problems of damaged packs.
func describeDamage(list []packDamage) string {
	s := make([]string, len(list))
	for i, d := range list {
		s[i] = d.problem
	}
	return strings.Join(s, "; ")
}

// userDamage is the error that reports damaged packs in the user's
// repository at path, naming the command that repairs the first; nil when
// none is damaged. An unreadable index without a pack is left out: git
// reads past it, and the failure had another cause.
func userDamage(path string, list []packDamage) error {
	var packs []packDamage
	for _, d := range list {
		if d.pack != "" {
			packs = append(packs, d)
		}
	}
	if len(packs) == 0 {
		return nil
	}
	d := packs[0]
	fix := fmt.Sprintf("move %s and its .idx out of %s, then fetch the objects `git -C %s fsck` names as missing "+
		"from another copy of the repository", d.name(), filepath.Dir(d.pack), shellQuote(path))
	if d.whole {
		fix = fmt.Sprintf("`git -C %s index-pack %s`, which writes its index anew", shellQuote(path), shellQuote(d.pack))
	}
	more := ""
	if len(packs) > 1 {
		more = fmt.Sprintf(" (and %d more damaged packs)", len(packs)-1)
	}
	return models.Errorf(models.CodeConflict,
		"the repository %s is damaged: %s%s. agentqueued does not change a repository it does not own: repair it with %s",
		path, d.problem, more, fix)
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// hashRefs lists the references under prefix of the repository at path
// that name an object (not symbolic ones).
func hashRefs(path, prefix string) ([]string, error) {
	list := func() ([]string, error) {
		r, err := openRepo(path)
		if err != nil {
			return nil, err
		}
		iter, err := r.Storer.IterReferences()
		if err != nil {
			return nil, err
		}
		var names []string
		err = iter.ForEach(func(ref *plumbing.Reference) error {
			if ref.Type() == plumbing.HashReference && strings.HasPrefix(ref.Name().String(), prefix) {
				names = append(names, ref.Name().String())
			}
			return nil
		})
		if errors.Is(err, storer.ErrStop) {
			err = nil
		}
		return sortedSet(names), err
	}
	names, err := list()
	if isEmptyRef(err) {
		if _, rerr := removeEmptyRefs(path); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		names, err = list()
	}
	return names, err
}

// salvage fetches the references refs, whole, from the repository src into
// dst and returns those it could not: a reference whose history lost an
// object is not taken.
func (w *Workspaces) salvage(ctx context.Context, dst, src string, refs []string) (missed []string) {
	if len(refs) == 0 {
		return nil
	}
	specs := make([]string, len(refs))
	for i, ref := range refs {
		specs[i] = "+" + ref + ":" + ref
	}
	if w.fetch(ctx, dst, src, false, nil, specs...) == nil {
		return nil
	}
	for i, spec := range specs {
		if w.fetch(ctx, dst, src, false, nil, spec) != nil {
			missed = append(missed, refs[i])
		}
	}
	return missed
}

// asidePath is a free name beside dir for a damaged copy of it.
func (w *Workspaces) asidePath(dir string) string {
	stem := dir + ".damaged-" + w.cfg.Clock.Now().UTC().Format("20060102T150405")
	name := stem
	for i := 2; exists(name); i++ {
		name = fmt.Sprintf("%s-%d", stem, i)
	}
	return name
}

// rebuildIntegration replaces the integration repository dir, whose packs
// lost are damaged, by a new one holding every reference of the old one
// whose history is whole: staged merges, task branches, the default
// branch as last seen. What it cannot keep is fetched again when needed
// (the default branch from the origin, a task branch from its checkout; a
// staged merge is merged again). Verification worktrees stay registered.
// The old repository is then removed.
func (w *Workspaces) rebuildIntegration(ctx context.Context, log *slog.Logger, r *models.RepoConfig, dir, common string, lost []packDamage) error {
	if err := quarantinePacks(common, lost); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".new-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := w.git(ctx, "", "init", "-q", "--bare", "-b", r.DefaultBranch, tmp); err != nil {
		return err
	}
	refs, err := hashRefs(dir, "refs/")
	if err != nil {
		return err
	}
	missed := w.salvage(ctx, tmp, dir, refs)
	if isDir(filepath.Join(dir, "worktrees")) {
		if err := os.Rename(filepath.Join(dir, "worktrees"), filepath.Join(tmp, "worktrees")); err != nil {
			return err
		}
		if err := dropLostWorktrees(log, tmp); err != nil {
			return err
		}
	}
	old := w.asidePath(dir)
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	log.Warn("repaired a damaged repository: rebuilt the integration repository", "problem", describeDamage(lost),
		"refs_kept", len(refs)-len(missed), "refs_refetched_when_needed", strings.Join(missed, " "))
	return nil
}

// dropLostWorktrees removes from the rebuilt repository at dir the
// registrations of verification worktrees whose commit it lost: their
// files stay for checks that may be running there, and Stage or Cleanup
// removes them as it does a worktree deleted by hand.
func dropLostWorktrees(log *slog.Logger, dir string) error {
	r, err := openRepo(dir)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(filepath.Join(dir, "worktrees"))
	if err != nil {
		return err
	}
	for _, e := range entries {
		admin := filepath.Join(dir, "worktrees", e.Name())
		b, err := os.ReadFile(filepath.Join(admin, "HEAD"))
		if err != nil {
			continue // not a worktree's entry; git prunes what is broken
		}
		head := strings.TrimSpace(string(b))
		if strings.HasPrefix(head, "ref:") || len(head) != 2*len(plumbing.ZeroHash) {
			continue
		}
		if r.Storer.HasEncodedObject(plumbing.NewHash(head)) == nil {
			continue
		}
		if err := os.RemoveAll(admin); err != nil {
			return err
		}
		log.Warn("dropped a verification worktree whose commit the rebuilt integration repository lacks", "worktree", e.Name())
	}
	return nil
}

// rebuildCheckout replaces the agent's clone dir, whose packs lost are
// damaged, by a new clone of the origin. The damaged one is first set
// aside (dir.damaged-<UTC time>), its damaged packs are replaced by what
// the origin and the integration repository hold (refill), and its
// uncommitted work is rescued there as Prepare does; its branches whose history is whole (task branches,
// rescue branches) are fetched into the new clone. The copy set aside is
// removed when all of it was carried over, and kept, named in the log,
// when anything was not. rescued names the rescue branch.
func (w *Workspaces) rebuildCheckout(ctx context.Context, log *slog.Logger, r *models.RepoConfig, dir, common string, lost []packDamage) (rescued string, err error) {
	src, err := w.origin(ctx, r)
	if err != nil {
		return "", err
	}
	aside := w.asidePath(dir)
	if err := os.Rename(dir, aside); err != nil {
		return "", err
	}
	log = log.With("set_aside", aside)
	log.Info("set a damaged checkout aside to clone it again", "problem", describeDamage(lost))
	gitDir := filepath.Join(aside, ".git")
	// The history the origin and the integration repository hold is
	// put back first: the rescue commits on top of it.
	if err := w.refill(ctx, r, aside, gitDir, lost); err != nil {
		log.Warn("could not fetch the objects of a damaged checkout again", "err", err)
	}
	rerr := removeStaleLocks(gitDir, true)
	if rerr == nil {
		rescued, rerr = w.rescue(ctx, aside, gitDir)
	}
	if err := w.clone(ctx, src, dir); err != nil {
		log.Error("set a damaged checkout aside and could not clone it again", "problem", describeDamage(lost), "err", err)
		return "", err
	}
	refs, err := hashRefs(aside, "refs/heads/")
	if err != nil {
		log.Error("set a damaged checkout aside: its branches cannot be listed", "err", err)
		return "", nil
	}
	refs = slices.DeleteFunc(refs, func(ref string) bool { return ref == "refs/heads/"+r.DefaultBranch })
	missed := w.salvage(ctx, dir, aside, refs)
	if rescued != "" && slices.Contains(missed, "refs/heads/"+rescued) {
		rescued = ""
	}
	if rerr != nil || len(missed) > 0 {
		rerrText := ""
		if rerr != nil {
			rerrText = rerr.Error()
		}
		log.Warn("repaired a damaged repository: cloned the checkout again and kept the damaged copy, whose work could not all be carried over",
			"problem", describeDamage(lost), "branches_not_carried_over", strings.Join(missed, " "), "rescue_failed", rerrText)
		return rescued, nil
	}
	if err := os.RemoveAll(aside); err != nil {
		return rescued, err
	}
	log.Warn("repaired a damaged repository: cloned the checkout again", "problem", describeDamage(lost),
		"branches_carried_over", len(refs), "rescued", rescued)
	return rescued, nil
}

// refill moves the damaged packs lost of the clone dir out of its
// objects/pack and fetches into it again, in new packs, every object of
// the origin's default branch and of the integration repository's
// references: the history a damaged pack of a clone held. Nothing the
// clone's run may be using (its tree, index, HEAD, references) changes.
// The objects are fetched into a new repository first, so that no
// reference of the damaged clone, whose history may have holes, tells the
// origin what not to send.
func (w *Workspaces) refill(ctx context.Context, r *models.RepoConfig, dir, common string, lost []packDamage) error {
	if err := quarantinePacks(common, lost); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(common, "aq-refill-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := w.git(ctx, "", "init", "-q", "--bare", tmp); err != nil {
		return err
	}
	origin, err := w.origin(ctx, r)
	if err != nil {
		return err
	}
	if err := w.fetch(ctx, tmp, origin, false, w.auth(origin),
		"+refs/heads/"+r.DefaultBranch+":refs/remotes/origin/"+r.DefaultBranch); err != nil {
		return err
	}
	if integ := w.integrationPath(r); isFile(filepath.Join(integ, "HEAD")) {
		// What the integration repository cannot give (it may be
		// damaged too) the next Prepare's clone does.
		w.fetch(ctx, tmp, integ, false, nil, "+refs/*:refs/*") //nolint:errcheck // best effort, checked by fsck after
	}
	from, to := filepath.Join(tmp, "objects", "pack"), filepath.Join(common, "objects", "pack")
	list, err := filepath.Glob(filepath.Join(from, "pack-*.pack"))
	if err != nil {
		return err
	}
	for _, pack := range list {
		stem := strings.TrimSuffix(filepath.Base(pack), ".pack")
		// The index first, as PackfileWriter does.
		for _, ext := range []string{".idx", ".pack"} {
			if err := os.Rename(filepath.Join(from, stem+ext), filepath.Join(to, stem+ext)); err != nil {
				return err
			}
		}
	}
	return syncDir(to)
}
