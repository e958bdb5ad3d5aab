package repo_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentqueued/agentqueued/internal/models"
)

// TestTitlesNeverReachTheCommandLine stages and delivers tasks whose
// titles would break a git command line: one that starts with "-" (an
// option, were it an argument of its own) and one of 200,000 characters,
// beyond the system's limit on one argument (128 KiB on Linux). Both are
// committed, staged and merged with their messages intact.
func TestTitlesNeverReachTheCommandLine(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a long title ", 200_000/13+1)[:200_000]
	for _, c := range []struct{ id, title string }{
		{"dash-task", "-m --amend --no-verify starts like options"},
		{"long-task", long},
	} {
		t.Run(c.id, func(t *testing.T) {
			t.Parallel()
			origin := bareOrigin(t)
			w, p, base, _ := setupLogged(t, &models.RepoConfig{SourceType: models.RepoClone, URL: origin})
			tk := task(c.id, c.title)
			ws := work(t, w, "a1", p, tk, map[string]string{"work.txt": c.id + "\n"})
			if got, want := git(t, ws.Dir, "log", "-1", "--format=%B", ws.Branch), c.title+" ("+c.id+")"; got != want {
				t.Fatalf("the sealed commit's message is %d characters %.60q…, want %d", len(got), got, len(want))
			}
			want := "Merge " + c.id + ": " + c.title + "\n\nBranch " + ws.Branch + "."
			stage(t, w, p, tk, ws.Dir)
			integ := filepath.Join(base, "integration", p.Repo.ID+".git")
			if got := git(t, integ, "log", "-1", "--format=%B", "refs/aq/staged/"+c.id); got != want {
				t.Fatalf("the staged merge's message is %d characters %.60q…, want %d", len(got), got, len(want))
			}
			if d := deliver(t, w, p, tk, ws.Dir); !d.Merged {
				t.Fatalf("delivery %+v", d)
			}
			if got := git(t, origin, "log", "-1", "--format=%B", "main"); got != want {
				t.Fatalf("the delivered merge's message is %d characters %.60q…, want %d", len(got), got, len(want))
			}
			if got := git(t, origin, "show", "main:work.txt"); got != c.id {
				t.Fatalf("main has work.txt = %q", got)
			}
		})
	}
}
