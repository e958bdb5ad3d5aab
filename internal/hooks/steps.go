package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/proc"
)

// Defaults of the steps.
const (
	defaultListFiles  = 200
	defaultLogCommits = 20
	defaultLogSince   = 24 * time.Hour
	// commandWaitDelay is how long a command's output is read after it
	// exited, while something it left behind holds it open.
	commandWaitDelay = 2 * time.Second
)

// stepError is a step's failure, told to the user as it is.
type stepError struct {
	step int
	typ  string
	msg  string
}

func (e *stepError) Error() string {
	return fmt.Sprintf("context_steps[%d] (%s): %s", e.step, e.typ, e.msg)
}

// checkout is the project's hook checkout, taken at the first step that
// needs it and given back when the steps are done.
type checkout struct {
	e    *Engine
	p    models.Project
	dir  string
	done func()
}

func (c *checkout) get(ctx context.Context) (string, error) {
	if c.dir != "" {
		return c.dir, nil
	}
	dir, done, err := c.e.co.HookCheckout(ctx, c.p)
	if err != nil {
		return "", err
	}
	c.dir, c.done = dir, done
	return dir, nil
}

func (c *checkout) release() {
	if c.done != nil {
		c.done()
		c.dir, c.done = "", nil
	}
}

// gather runs the hook's context steps in order. It stops at the first
// step that fails (err) or whose short-circuit holds (skip says which).
func (e *Engine) gather(ctx context.Context, h models.Hook, p models.Project) (results []models.StepResult, skip string, err error) {
	co := &checkout{e: e, p: p}
	defer co.release()
	for i, s := range h.ContextSteps {
		res, err := e.step(ctx, co, h, p, s)
		if err != nil {
			var se *stepError
			if !errors.As(err, &se) {
				err = &stepError{step: i, typ: s.Type, msg: err.Error()}
			}
			return results, "", err
		}
		res.Type = s.Type
		results = append(results, res)
		if why := shortCircuit(s, res); why != "" {
			not := "the LLM was not called"
			if h.FileTask != nil {
				not = "no task was filed"
			}
			return results, fmt.Sprintf("context_steps[%d] (%s): %s, so %s", i, s.Type, why, not), nil
		}
	}
	return results, "", nil
}

// shortCircuit says why a step's skip_llm_if holds, or "".
func shortCircuit(s models.HookStep, r models.StepResult) string {
	switch s.SkipLLMIf {
	case models.SkipIfExitZero:
		if r.ExitCode != nil && *r.ExitCode == 0 {
			return "the command exited 0"
		}
	case models.SkipIfEmpty:
		return emptyOutput(s, r)
	case models.SkipIfStatusOK:
		if r.Status >= 200 && r.Status < 300 {
			return fmt.Sprintf("the HTTP status is %d", r.Status)
		}
	}
	return ""
}

// emptyOutput says why a step's output counts as empty for output_empty,
// or "": blank text, a db_query that returned no rows, or an output that is
// nothing but an empty JSON list, object or null (an API with nothing to
// say).
func emptyOutput(s models.HookStep, r models.StepResult) string {
	out := strings.TrimSpace(r.Output)
	switch {
	case out == "":
		return "the output is empty"
	case s.Type == models.StepDBQuery && r.Count != nil && *r.Count == 0:
		return "the query returned no rows"
	case models.EmptyJSON(out):
		switch out[0] {
		case '[':
			return "the output is an empty list"
		case '{':
			return "the output is an empty object"
		}
		return "the output is null"
	}
	return ""
}

// step runs one context step.
func (e *Engine) step(ctx context.Context, co *checkout, h models.Hook, p models.Project, s models.HookStep) (models.StepResult, error) {
	limit := e.cfg.StepOutputCap
	switch s.Type {
	case models.StepReadFile:
		dir, err := co.get(ctx)
		if err != nil {
			return models.StepResult{}, err
		}
		return readFile(dir, s.Path, limit)
	case models.StepListFiles:
		dir, err := co.get(ctx)
		if err != nil {
			return models.StepResult{}, err
		}
		return listFiles(dir, s, limit)
	case models.StepGitDiff:
		dir, err := co.get(ctx)
		if err != nil {
			return models.StepResult{}, err
		}
		base, head := s.Base, s.Head
		if base == "" {
			base = "HEAD~1"
		}
		if head == "" {
			head = "HEAD"
		}
		out, cut, err := e.co.GitDiff(ctx, dir, base, head, limit)
		if err != nil {
			return models.StepResult{}, err
		}
		return models.StepResult{Output: out, Truncated: cut}, nil
	case models.StepGitLog:
		dir, err := co.get(ctx)
		if err != nil {
			return models.StepResult{}, err
		}
		since := defaultLogSince
		if s.Since != "" {
			since, _ = time.ParseDuration(s.Since) // validated with the hook
		}
		n := s.MaxCount
		if n == 0 {
			n = defaultLogCommits
		}
		out, count, cut, err := e.co.GitLog(ctx, dir, e.cfg.Clock.Now().Add(-since), n, limit)
		if err != nil {
			return models.StepResult{}, err
		}
		return models.StepResult{Output: out, Truncated: cut, Count: &count}, nil
	case models.StepDBQuery:
		out, n, err := e.store.HookQuery(ctx, h.ProjectID, s)
		if err != nil {
			return models.StepResult{}, err
		}
		out, cut := capText(out, limit)
		return models.StepResult{Output: out, Truncated: cut, Count: &n}, nil
	case models.StepHTTPGet:
		return e.httpGet(ctx, s, limit)
	case models.StepRunCommand:
		if !p.Settings.AllowsHookCommand(s.Command) {
			return models.StepResult{}, fmt.Errorf("%q is not one of project %s's hook_commands (settings.hook_commands)", s.Command, p.ID)
		}
		dir, err := co.get(ctx)
		if err != nil {
			return models.StepResult{}, err
		}
		return e.runCommand(ctx, dir, s, limit)
	}
	return models.StepResult{}, fmt.Errorf("unknown step type %q", s.Type)
}

// capText cuts s at limit bytes, on a rune boundary.
func capText(s string, limit int) (string, bool) {
	if len(s) <= limit {
		return s, false
	}
	cut := limit
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut], true
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// inside resolves rel under root and refuses a path that leaves it,
// through .. or a symbolic link.
func inside(root, rel string) (string, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", err
	}
	p, err := filepath.EvalSymlinks(filepath.Join(realRoot, filepath.FromSlash(rel)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: no such file or directory in the checkout", rel)
		}
		return "", err
	}
	if p != realRoot && !strings.HasPrefix(p, realRoot+string(filepath.Separator)) {
		return "", fmt.Errorf("%s: leads outside the checkout", rel)
	}
	return p, nil
}

func readFile(root, rel string, limit int) (models.StepResult, error) {
	p, err := inside(root, rel)
	if err != nil {
		return models.StepResult{}, err
	}
	// Opened without blocking: a FIFO left in the checkout must not hang
	// the run; it is refused below as not a regular file.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return models.StepResult{}, fmt.Errorf("%s: %w", rel, cause(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return models.StepResult{}, fmt.Errorf("%s: not a regular file", rel)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return models.StepResult{}, fmt.Errorf("%s: %w", rel, err)
	}
	out, cut := capText(string(b), limit)
	return models.StepResult{Output: out, Truncated: cut}, nil
}

func listFiles(root string, s models.HookStep, limit int) (models.StepResult, error) {
	rel := s.Path
	if rel == "" {
		rel = "."
	}
	dir, err := inside(root, rel)
	if err != nil {
		return models.StepResult{}, err
	}
	realRoot, _ := filepath.EvalSymlinks(root)
	max := s.MaxCount
	if max == 0 {
		max = defaultListFiles
	}
	var (
		files []string
		more  bool
	)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if s.Pattern != "" {
			if ok, _ := path.Match(s.Pattern, d.Name()); !ok {
				return nil
			}
		}
		if len(files) == max {
			more = true
			return filepath.SkipAll
		}
		r, _ := filepath.Rel(realRoot, p)
		files = append(files, filepath.ToSlash(r))
		return nil
	})
	if err != nil {
		return models.StepResult{}, fmt.Errorf("%s: %w", rel, err)
	}
	slices.Sort(files)
	n := len(files)
	out, cut := capText(strings.Join(files, "\n"), limit)
	return models.StepResult{Output: out, Truncated: cut || more, Count: &n}, nil
}

// allowedHost reports whether host is on the allow list.
func allowedHost(list []string, host string) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, a := range list {
		a = strings.ToLower(a)
		if rest, ok := strings.CutPrefix(a, "*."); ok {
			if strings.HasSuffix(host, "."+rest) {
				return true
			}
			continue
		}
		if host == a {
			return true
		}
	}
	return false
}

func (e *Engine) httpGet(ctx context.Context, s models.HookStep, limit int) (models.StepResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return models.StepResult{}, fmt.Errorf("url: %w", err)
	}
	if !allowedHost(e.cfg.HTTPAllowHosts, req.URL.Hostname()) {
		return models.StepResult{}, fmt.Errorf("host %q is not on the allow list (hooks.http_allow_hosts)", req.URL.Hostname())
	}
	timeout := e.cfg.HTTPTimeout
	if s.TimeoutSeconds > 0 {
		timeout = time.Duration(s.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req = req.WithContext(ctx)
	req.Header.Set("User-Agent", "agentqueued-hooks")
	base := e.cfg.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	client := *base
	client.CheckRedirect = func(r *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("more than 5 redirects")
		}
		if !allowedHost(e.cfg.HTTPAllowHosts, r.URL.Hostname()) {
			return fmt.Errorf("redirected to host %q, which is not on the allow list", r.URL.Hostname())
		}
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return models.StepResult{}, fmt.Errorf("GET %s: %w", s.URL, cause(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if err != nil {
		return models.StepResult{}, fmt.Errorf("GET %s: reading the body: %w", s.URL, err)
	}
	out, cut := capText(string(b), limit)
	return models.StepResult{Output: out, Truncated: cut, Status: resp.StatusCode}, nil
}

// commandEnvPass are the variables run_command keeps from the daemon's
// environment; no other (no token, no key) reaches a command.
var commandEnvPass = []string{"PATH", "HOME", "LANG", "TZ", "TMPDIR", "USER", "LOGNAME"}

// cappedBuffer keeps the first max bytes written to it.
type cappedBuffer struct {
	buf     bytes.Buffer
	max     int
	dropped bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if room := c.max - c.buf.Len(); room < len(p) {
		c.dropped = true
		if room > 0 {
			c.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (e *Engine) runCommand(ctx context.Context, dir string, s models.HookStep, limit int) (models.StepResult, error) {
	argv := strings.Fields(s.Command)
	timeout := e.cfg.CommandTimeout
	if s.TimeoutSeconds > 0 {
		timeout = time.Duration(s.TimeoutSeconds) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The hook checkout is shared with the daemon that may have taken the
	// database over: a deposed daemon starts nothing in it.
	if err := e.store.ConfirmLease(ctx); err != nil {
		return models.StepResult{}, fmt.Errorf("%q not started: %w", s.Command, err)
	}
	cmd := proc.Command(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.WaitDelay = commandWaitDelay
	environ := e.cfg.Environ
	if environ == nil {
		environ = os.Environ()
	}
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); slices.Contains(commandEnvPass, k) || strings.HasPrefix(k, "LC_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out := &cappedBuffer{max: limit}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return models.StepResult{}, fmt.Errorf("%q could not start: %v", s.Command, cause(err))
	}
	err := cmd.Wait()
	// Whatever the command started in the background ends with it.
	_ = proc.KillGroup(cmd.Process.Pid)
	code := 0
	var ee *exec.ExitError
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return models.StepResult{}, fmt.Errorf("%q did not finish within %s", s.Command, timeout)
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case errors.Is(err, exec.ErrWaitDelay):
		// It exited; a process it left behind held its output open.
	case err != nil:
		return models.StepResult{}, fmt.Errorf("%q failed: %v", s.Command, cause(err))
	}
	text, cut := capText(out.buf.String(), limit)
	return models.StepResult{Output: text, Truncated: cut || out.dropped, ExitCode: &code}, nil
}

// cause is the innermost useful part of err: what the operating system or
// the network said, without the operation Go wrapped around it.
func cause(err error) error {
	if u := errors.Unwrap(err); u != nil {
		return u
	}
	return err
}
