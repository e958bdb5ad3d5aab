package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentqueued/agentqueued/internal/api"
	"github.com/agentqueued/agentqueued/internal/models"
)

// settingFlags collects project edit's --set KEY=VALUE and --unset KEY
// into a settings merge patch, each value typed by its setting's kind.
type settingFlags struct {
	patch models.SettingsPatch
	// lists holds the entries of list settings given so far.
	lists map[string][]string
}

// set is the flag.Value of --set.
type setFlag struct{ s *settingFlags }

func (f setFlag) String() string { return "" }

func (f setFlag) Set(v string) error {
	key, val, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("%q is not KEY=VALUE", v)
	}
	key = strings.TrimSpace(key)
	kind, err := settingKind(key)
	if err != nil {
		return err
	}
	var raw []byte
	switch kind {
	case models.SettingBool:
		b, err := strconv.ParseBool(strings.TrimSpace(val))
		if err != nil {
			return fmt.Errorf("%s: %q is not true or false", key, val)
		}
		raw, _ = json.Marshal(b)
	case models.SettingList:
		if val == "" {
			f.s.lists[key] = nil
			raw = []byte("null")
			break
		}
		f.s.lists[key] = append(f.s.lists[key], val)
		raw, _ = json.Marshal(f.s.lists[key])
	default:
		if val == "" {
			raw = []byte("null")
			break
		}
		raw, _ = json.Marshal(val)
	}
	f.s.patch[key] = raw
	return nil
}

// unsetFlag is the flag.Value of --unset.
type unsetFlag struct{ s *settingFlags }

func (f unsetFlag) String() string { return "" }

func (f unsetFlag) Set(v string) error {
	key := strings.TrimSpace(v)
	if _, err := settingKind(key); err != nil {
		return err
	}
	delete(f.s.lists, key)
	f.s.patch[key] = json.RawMessage("null")
	return nil
}

// settingKind returns a setting's kind, or an error naming the key and
// listing the settings.
func settingKind(key string) (models.SettingKind, error) {
	kind, ok := models.SettingKinds[key]
	if !ok {
		return "", fmt.Errorf("%q is not a project setting (settings: %s)", key, strings.Join(models.SettingKeys(), ", "))
	}
	return kind, nil
}

// repoFromFlag turns --repo into a repository: a path (absolute, or
// starting with . or ~ ... resolved here) is linked, anything else is a URL
// to clone.
func repoFromFlag(v string) (models.RepoConfig, error) {
	if strings.HasPrefix(v, "/") || strings.HasPrefix(v, ".") {
		abs, err := filepath.Abs(v)
		if err != nil {
			return models.RepoConfig{}, fmt.Errorf("--repo: %w", err)
		}
		return models.RepoConfig{SourceType: models.RepoLink, SourcePath: abs}, nil
	}
	return models.RepoConfig{SourceType: models.RepoClone, URL: v}, nil
}

func (c *ctl) projectEdit(ctx context.Context, args []string) error {
	fs := c.flagSet("project edit")
	name := fs.String("name", "", "new display `name`")
	var weight float64
	fs.Float64Var(&weight, "credit-weight", 0, "new scheduling `weight`")
	fs.Float64Var(&weight, "weight", 0, "new scheduling `weight` (as --credit-weight)")
	maxAgents := fs.Int("max-agents", 0, "new maximum of concurrent `agents`")
	status := fs.String("status", "", "new `status`: ACTIVE, PAUSED or ARCHIVED")
	budget := fs.Int64("budget", 0, "new token budget `limit`; negative removes the limit")
	discord := fs.String("discord-channel", "", "notification channel `id`; empty clears it")
	repoFlag := fs.String("repo", "", "repository: a local `path` (linked) or a URL (cloned)")
	branch := fs.String("branch", "", "the repository's default `branch`")
	settings := &settingFlags{patch: models.SettingsPatch{}, lists: map[string][]string{}}
	fs.Var(setFlag{settings}, "set", "set a setting, `KEY=VALUE` (repeatable; a list setting takes one entry each time, "+
		"KEY= empties it); settings: "+strings.Join(models.SettingKeys(), ", "))
	fs.Var(unsetFlag{settings}, "unset", "remove a setting, back to its default (`KEY`, repeatable)")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	set := visited(fs)
	var patch models.ProjectPatch
	if set["name"] {
		patch.Name = name
	}
	if set["credit-weight"] || set["weight"] {
		patch.CreditWeight = &weight
	}
	if set["max-agents"] {
		patch.MaxConcurrentAgents = maxAgents
	}
	if set["status"] {
		st := models.ProjectStatus(strings.ToUpper(*status))
		patch.Status = &st
	}
	if set["budget"] {
		if *budget < 0 {
			patch.ClearBudgetLimit = true // the flag's documented way to remove the limit
		} else {
			patch.BudgetLimit = budget
		}
	}
	if set["discord-channel"] {
		patch.DiscordChannelID = discord
	}
	if len(settings.patch) > 0 {
		patch.SettingsMerge = &settings.patch
	}
	if set["repo"] || set["branch"] {
		cur, err := c.client.GetProject(ctx, pos[0])
		if err != nil {
			return err
		}
		var r models.RepoConfig
		if cur.Repo != nil {
			r = *cur.Repo
		}
		if set["repo"] {
			next, err := repoFromFlag(*repoFlag)
			if err != nil {
				return usagef("ctl project edit: %v", err)
			}
			r.SourceType, r.URL, r.SourcePath = next.SourceType, next.URL, next.SourcePath
			if r.SourceType != models.RepoLink {
				r.InPlace = false
			}
		} else if cur.Repo == nil {
			return usagef("ctl project edit: project %s has no repository: give --repo with --branch", pos[0])
		}
		if set["branch"] {
			r.DefaultBranch = *branch
		}
		patch.Repo = &r
	}
	if len(patch.Fields()) == 0 {
		return usagef("ctl project edit: nothing to change (use --name, --weight, --max-agents, --status, --budget, " +
			"--discord-channel, --repo, --branch, --set or --unset)")
	}
	p, err := c.client.UpdateProject(ctx, pos[0], patch)
	if err != nil {
		return err
	}
	return c.emit(p, func(w io.Writer) { printProject(w, p) })
}

// projectArchive archives a project: it takes no more work and leaves
// the lists of choices.
func (c *ctl) projectArchive(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("project archive"), args, "ID")
	if err != nil {
		return err
	}
	st := models.ProjectArchived
	p, err := c.client.UpdateProject(ctx, pos[0], models.ProjectPatch{Status: &st})
	if err != nil {
		return err
	}
	return c.emit(p, func(w io.Writer) { printProject(w, p) })
}

// projectLand retries the landings of a project that wait for its LINK
// repository's checked-out default branch to be clean (`agentqueued land
// PROJECT` is the same). It fails while a landing still waits, and when
// one could not be merged (the default branch moved and the merge now
// conflicts), naming the files and what comes next.
func (c *ctl) projectLand(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("project land"), args, "PROJECT")
	if err != nil {
		return err
	}
	res, err := c.client.LandProject(ctx, pos[0])
	if err != nil {
		return err
	}
	if err := c.emit(res, func(w io.Writer) { printLand(w, res) }); err != nil {
		return err
	}
	var errs []error
	if n := len(res.Waiting); n > 0 {
		errs = append(errs, fmt.Errorf("project %s: %d landing(s) still wait: commit or stash the changes named above, then run land again",
			res.ProjectID, n))
	}
	if n := len(res.Failed); n > 0 {
		next := "see why above"
		if slices.ContainsFunc(res.Failed, func(t models.LandTask) bool { return len(t.Files) > 0 }) {
			next = "a task whose merge conflicts runs again with the files named above to resolve"
		}
		errs = append(errs, fmt.Errorf("project %s: %d landing(s) failed, nothing of them merged: %s; follow a task with "+
			"`agentqueued ctl task show %s`", res.ProjectID, n, next, res.Failed[0].TaskID))
	}
	return errors.Join(errs...)
}

// printLand prints which tasks landed, which still wait and which failed,
// with why.
func printLand(w io.Writer, res models.LandResult) {
	if len(res.Landed) == 0 && len(res.Waiting) == 0 && len(res.Failed) == 0 {
		fmt.Fprintf(w, "nothing waits to land in project %s\n", res.ProjectID)
		return
	}
	for _, t := range res.Landed {
		fmt.Fprintf(w, "landed   %s (%s): %s\n", t.TaskID, t.Status, t.Reason)
	}
	for _, t := range res.Waiting {
		fmt.Fprintf(w, "waiting  %s (%s): %s\n", t.TaskID, t.Status, t.Reason)
	}
	for _, t := range res.Failed {
		word := "failed  "
		if len(t.Files) > 0 {
			word = "conflict"
		}
		fmt.Fprintf(w, "%s %s (%s): %s\n", word, t.TaskID, t.Status, t.Reason)
	}
}

// settingRows returns a project's settings as key and value, sorted by
// key, those left at their default omitted.
func settingRows(s models.ProjectSettings) [][2]string {
	data, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([][2]string, 0, len(keys))
	for _, k := range keys {
		var v string
		switch x := m[k].(type) {
		case []any:
			parts := make([]string, len(x))
			for i, e := range x {
				parts[i] = fmt.Sprint(e)
			}
			v = strings.Join(parts, "; ")
		default:
			v = fmt.Sprint(x)
		}
		out = append(out, [2]string{k, v})
	}
	return out
}

// projectDelete deletes a project with everything it holds; --yes
// confirms it.
func (c *ctl) projectDelete(ctx context.Context, args []string) error {
	fs := c.flagSet("project delete")
	yes := fs.Bool("yes", false, "confirm: the project's tasks, hooks, workflows and runs are deleted with it")
	pos, err := c.parse(fs, args, "ID")
	if err != nil {
		return err
	}
	if !*yes {
		return usagef("ctl project delete: deleting %s deletes its tasks, hooks, workflows and runs for good: "+
			"give --yes to confirm (or archive it: ctl project archive %s)", pos[0], pos[0])
	}
	if err := c.client.DeleteProject(ctx, pos[0]); err != nil {
		return err
	}
	return c.emit(map[string]string{"deleted": pos[0]}, func(w io.Writer) { fmt.Fprintf(w, "project %s deleted\n", pos[0]) })
}

func (c *ctl) projectCreate(ctx context.Context, args []string) error {
	fs := c.flagSet("project create")
	file := fs.String("file", "", "read the whole project from a JSON `file`")
	name := fs.String("name", "", "display `name` (default the id)")
	weight := fs.Float64("credit-weight", 0, "scheduling `weight` (default 1)")
	maxAgents := fs.Int("max-agents", 0, "maximum concurrent `agents` (default 2)")
	budget := fs.Int64("budget", 0, "token budget `limit` (default unlimited)")
	repoSource := fs.String("repo-source", "", "repository source: clone, link or init (default: clone with --repo-url, link with --repo-path)")
	repoURL := fs.String("repo-url", "", "repository `URL` to clone")
	repoPath := fs.String("repo-path", "", "absolute `path` of an existing repository to link")
	branch := fs.String("branch", "", "default `branch` (default main)")

	pos, err := parseFlags(fs, args, c.out)
	if err != nil {
		return err
	}
	var p models.ProjectSpec
	set := visited(fs)
	if *file != "" {
		if len(pos) > 0 {
			return usagef("ctl project create: --file takes no ID argument")
		}
		for _, f := range []string{"name", "credit-weight", "max-agents", "budget", "repo-source", "repo-url", "repo-path", "branch"} {
			if set[f] {
				return usagef("ctl project create: --%s cannot be combined with --file", f)
			}
		}
		if err := readStrict(*file, &p); err != nil {
			return fmt.Errorf("read project: %w", err)
		}
	} else {
		if len(pos) != 1 {
			return usagef("ctl project create: want ID, got %d argument(s)", len(pos))
		}
		p = models.ProjectSpec{ID: pos[0], Name: *name, CreditWeight: *weight, MaxConcurrentAgents: *maxAgents}
		if set["budget"] {
			p.BudgetLimit = budget
		}
		if *repoSource != "" || *repoURL != "" || *repoPath != "" || *branch != "" {
			src := models.RepoSourceType(strings.ToUpper(*repoSource))
			if src == "" {
				src = models.RepoClone
				if *repoPath != "" {
					src = models.RepoLink
				}
			}
			p.Repo = &models.RepoConfig{SourceType: src, URL: *repoURL, SourcePath: *repoPath, DefaultBranch: *branch}
		}
	}
	if err := c.connect(); err != nil {
		return err
	}
	created, err := c.client.CreateProject(ctx, p.Project())
	if err != nil {
		return err
	}
	return c.emit(created, func(w io.Writer) { printProject(w, created) })
}

func (c *ctl) projectList(ctx context.Context, args []string) error {
	if _, err := c.parse(c.flagSet("project list"), args); err != nil {
		return err
	}
	ps, err := c.client.ListProjects(ctx)
	if err != nil {
		return err
	}
	return c.emit(api.ProjectList{Projects: ps}, func(w io.Writer) { printProjects(w, ps) })
}

func (c *ctl) projectShow(ctx context.Context, args []string) error {
	pos, err := c.parse(c.flagSet("project show"), args, "ID")
	if err != nil {
		return err
	}
	p, err := c.client.GetProject(ctx, pos[0])
	if err != nil {
		return err
	}
	return c.emit(p, func(w io.Writer) { printProject(w, p) })
}
