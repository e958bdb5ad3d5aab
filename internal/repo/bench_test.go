package repo_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/agentqueued/agentqueued/internal/models"
	"github.com/agentqueued/agentqueued/internal/repo"
)

// BenchmarkTaskLifecycle measures the git work of one task in a CLONE
// project whose origin is a local bare repository with 200 files: Prepare
// (fetch, reset, branch), Seal (commit), Stage (integration fetch,
// merge-tree, verification worktree), Deliver (merge, compare-and-swap of
// main) and Cleanup. It reports the median of each step, and how many
// times the steps of one task ask the lease's fence (each ask is one
// read of the lease row; see store.BenchmarkConfirmLease).
func BenchmarkTaskLifecycle(b *testing.B) {
	dir := b.TempDir()
	seed, origin := filepath.Join(dir, "seed"), filepath.Join(dir, "origin.git")
	run := func(d string, args ...string) {
		cmd := exec.Command("git", append([]string{"-c", "user.name=b", "-c", "user.email=b@b", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = d
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	run(dir, "init", "-q", "-b", "main", seed)
	for i := range 200 {
		if err := os.WriteFile(filepath.Join(seed, fmt.Sprintf("f%03d.txt", i)), []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	run(seed, "add", "-A")
	run(seed, "commit", "-q", "-m", "seed")
	run(dir, "clone", "-q", "--bare", seed, origin)
	fences := 0
	w, err := repo.New(repo.Config{BaseDir: filepath.Join(dir, "aq"), Fence: func(context.Context) error {
		fences++
		return nil
	}})
	if err != nil {
		b.Fatal(err)
	}
	p := models.Project{ID: "web", Repo: &models.RepoConfig{ID: "web", SourceType: models.RepoClone, URL: origin, DefaultBranch: "main"}}
	a := models.Agent{ID: "a1"}
	steps := map[string][]time.Duration{}
	timed := func(name string, f func() error) {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		steps[name] = append(steps[name], time.Since(start))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := models.Task{ID: fmt.Sprintf("task-%d", i), Title: "bench"}
		var ws models.Workspace
		timed("prepare", func() (err error) { ws, err = w.Prepare(ctx, a, p, t); return err })
		if err := os.WriteFile(filepath.Join(ws.Dir, fmt.Sprintf("new-%d.txt", i)), []byte("x\n"), 0o644); err != nil {
			b.Fatal(err)
		}
		timed("seal", func() error { _, err := w.Seal(ctx, p, t, ws); return err })
		timed("stage", func() error { _, err := w.Stage(ctx, p, t, ws.Dir); return err })
		timed("deliver", func() error {
			d, err := w.Deliver(ctx, p, t, ws.Dir)
			if err == nil && !d.Merged {
				err = fmt.Errorf("not merged: %s", d.Note)
			}
			return err
		})
		timed("cleanup", func() error { return w.Cleanup(ctx, p, t, ws.Dir, true) })
		w.Release(ws)
	}
	b.StopTimer()
	for name, ds := range steps {
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, name+"-ms")
	}
	b.ReportMetric(float64(fences)/float64(b.N), "fences/task")
}
