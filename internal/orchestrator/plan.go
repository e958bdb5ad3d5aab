package orchestrator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentqueued/agentqueued/internal/models"
)

// readPlanFile turns a plan file a root task's agent left in its checkout
// (one of PlanPaths) into the task's pending plan, and removes the file so
// that it is not merged. Each "## " heading is a subtask: its title on the
// heading line, its description below; the subtasks run in order.
func (o *Orchestrator) readPlanFile(ctx context.Context, t models.Task, dir string) error {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	for _, rel := range o.cfg.PlanPaths {
		path := filepath.Join(root, filepath.Clean("/" + rel)[1:])
		// The checkout is the agent's: a link could point the daemon at a
		// file outside it, to read or to remove. Only a regular file whose
		// real path is inside the checkout is a plan.
		fi, err := os.Lstat(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		real, err := filepath.EvalSymlinks(path)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() || real != path {
			return fmt.Errorf("%s is not a regular file inside the checkout", rel)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		tasks, err := ParsePlan(string(data))
		if err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if _, err := o.store.SavePlan(ctx, t.ID, "file:"+rel, tasks); err != nil {
			return fmt.Errorf("%s: %w", rel, err)
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		o.log.Info("plan file read", "task_id", t.ID, "path", rel, "subtasks", len(tasks))
	}
	return nil
}

// ParsePlan reads a markdown plan: each "## " heading starts a subtask
// titled by the heading, described by the lines below it. Text before the
// first heading is ignored.
func ParsePlan(text string) ([]models.BatchTask, error) {
	var out []models.BatchTask
	var desc []string
	flush := func() {
		if len(out) > 0 {
			out[len(out)-1].Description = strings.TrimSpace(strings.Join(desc, "\n"))
		}
		desc = nil
	}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if title, ok := strings.CutPrefix(line, "## "); ok {
			flush()
			out = append(out, models.BatchTask{Title: strings.TrimSpace(title)})
			continue
		}
		desc = append(desc, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	flush()
	if len(out) == 0 {
		return nil, models.Errorf(models.CodeInvalid, "no subtask found: start each with a \"## \" heading")
	}
	return out, nil
}
