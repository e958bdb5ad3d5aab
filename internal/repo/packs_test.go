package repo

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
)

// visiblePacks lists the names of the pack files (pack-*) of a bare
// repository.
func visiblePacks(t *testing.T, dir string) []string {
	t.Helper()
	list, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*"))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range list {
		list[i] = filepath.Base(p)
	}
	return list
}

// packOf returns the pack git makes of the history of rev in dir.
func packOf(t *testing.T, dir, rev string) []byte {
	t.Helper()
	cmd := exec.Command("git", "pack-objects", "--revs", "--stdout", "-q")
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(rev+"\n")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git pack-objects: %v", err)
	}
	return out
}

// atomicAt returns the atomic storage of the repository at dir.
func atomicAt(t *testing.T, dir string) atomicStorage {
	t.Helper()
	r, err := openRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := withAtomicStorage(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestFetchedPacksAppearWhole fetches with go-git through the atomic
// storage and looks into objects/pack each time a file appears there: at
// no point is a pack or an index visible that git or go-git cannot read
// whole (go-git writes the index in place, so a kill left it empty). The
// index appears before its pack: go-git fails on a pack without one.
func TestFetchedPacksAppearWhole(t *testing.T) {
	t.Parallel()
	bare, clone := origin(t)
	for i := range 5 {
		commit(t, clone, "f"+string(rune('a'+i))+".txt", strings.Repeat("line\n", 100*(i+1)))
	}
	dst := filepath.Join(t.TempDir(), "dst.git")
	run(t, "", "init", "-q", "--bare", dst)
	st := atomicAt(t, dst)
	var steps []string
	st.packStep = func(path string) {
		steps = append(steps, filepath.Ext(path))
		if list, err := damagedPacks(dst); err != nil || len(list) > 0 {
			t.Errorf("when %s appeared: %v %+v", filepath.Base(path), err, list)
		}
	}
	remote := git.NewRemote(st, &config.RemoteConfig{Name: "origin", URLs: []string{bare}})
	if err := remote.FetchContext(context.Background(), &git.FetchOptions{RemoteName: "origin",
		RefSpecs: []config.RefSpec{"+refs/heads/*:refs/heads/*"}}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(steps, []string{".idx", ".pack"}) {
		t.Fatalf("files appeared in the order %v, want the index, then the pack", steps)
	}
	run(t, dst, "fsck", "--strict", "--no-dangling")
	r, err := openRepo(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CommitObject(plumbing.NewHash(run(t, bare, "rev-parse", "main"))); err != nil {
		t.Fatalf("go-git cannot read the fetched history: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dst, "objects", "pack", "tmp_*")); len(left) > 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}

// TestKilledPackWriteLeavesNoPack writes half a pack and stops, as a
// daemon killed mid-fetch does: nothing named pack-* is visible, the
// repository stays readable, and a later whole write installs the pack.
func TestKilledPackWriteLeavesNoPack(t *testing.T) {
	t.Parallel()
	bare, clone := origin(t)
	commit(t, clone, "more.txt", strings.Repeat("more\n", 1000))
	data := packOf(t, bare, "main")
	dst := filepath.Join(t.TempDir(), "dst.git")
	run(t, "", "init", "-q", "--bare", dst)

	killed, err := atomicAt(t, dst).PackfileWriter()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killed.(*packWriter).f.Close() })
	if _, err := killed.Write(data[:len(data)/2]); err != nil {
		t.Fatal(err)
	}
	if got := visiblePacks(t, dst); len(got) > 0 {
		t.Fatalf("a pack half written is visible: %v", got)
	}
	run(t, dst, "fsck", "--no-dangling")

	pw, err := atomicAt(t, dst).PackfileWriter()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	if got := visiblePacks(t, dst); len(got) != 2 {
		t.Fatalf("packs after a whole write: %v", got)
	}
	if list, err := damagedPacks(dst); err != nil || len(list) > 0 {
		t.Fatalf("the pack written is damaged: %v %+v", err, list)
	}
	run(t, dst, "cat-file", "-e", run(t, bare, "rev-parse", "main")+"^{tree}")
}

// TestFetchReplacesAnIndexAKillLeftEmpty starts from what a daemon killed
// while go-git wrote a pack's index left: an empty pack-<hash>.idx. go-git
// kept an index that existed when the same pack came again, renamed the
// pack beside it, and every later read of the repository failed ("EOF").
// The atomic storage writes the index anew.
func TestFetchReplacesAnIndexAKillLeftEmpty(t *testing.T) {
	t.Parallel()
	bare, clone := origin(t)
	run(t, bare, "config", "pack.threads", "1") // the same pack each time
	base := filepath.Join(t.TempDir(), "a.git")
	run(t, "", "clone", "-q", "--bare", bare, base)
	commit(t, clone, "next.txt", strings.Repeat("next\n", 500))
	spec := "+refs/heads/*:refs/heads/*"

	// The pack this fetch brings, learnt from a copy of the repository.
	probe := filepath.Join(t.TempDir(), "probe.git")
	run(t, "", "clone", "-q", "--bare", "--no-local", base, probe)
	before := visiblePacks(t, probe)
	if err := fetch(context.Background(), probe, bare, false, nil, nil, spec); err != nil {
		t.Fatal(err)
	}
	var fetched []string
	for _, p := range visiblePacks(t, probe) {
		if !slices.Contains(before, p) && strings.HasSuffix(p, ".idx") {
			fetched = append(fetched, p)
		}
	}
	if len(fetched) != 1 {
		t.Fatalf("the probe fetched packs %v", fetched)
	}

	dst := filepath.Join(t.TempDir(), "dst.git")
	run(t, "", "clone", "-q", "--bare", "--no-local", base, dst)
	left := filepath.Join(dst, "objects", "pack", fetched[0])
	if err := os.WriteFile(left, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := fetch(context.Background(), dst, bare, false, nil, nil, spec); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(visiblePacks(t, dst), strings.TrimSuffix(fetched[0], ".idx")+".pack") {
		t.Fatalf("the fetch brought another pack than the probe's %s: %v", fetched[0], visiblePacks(t, dst))
	}
	if list, err := damagedPacks(dst); err != nil || len(list) > 0 {
		t.Fatalf("the fetch left a damaged pack: %v %+v", err, list)
	}
	r, err := openRepo(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.CommitObject(plumbing.NewHash(run(t, bare, "rev-parse", "main"))); err != nil {
		t.Fatalf("go-git cannot read the repository after the fetch: %v", err)
	}
}

// TestDamagedPacksAreFound checks the check a repair starts with.
func TestDamagedPacksAreFound(t *testing.T) {
	t.Parallel()
	bare, clone := origin(t)
	commit(t, clone, "more.txt", strings.Repeat("more\n", 1000))
	run(t, bare, "repack", "-q", "-a", "-d")
	packs, _ := filepath.Glob(filepath.Join(bare, "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs %v", packs)
	}
	pack := packs[0]
	idx := strings.TrimSuffix(pack, ".pack") + ".idx"
	whole, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	goodIdx, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(bare, "objects", "pack", "pack-"+strings.Repeat("ab", 20)+".idx")
	for _, c := range []struct {
		name         string
		pack, idx    []byte
		orphan       bool
		want         string
		wantWhole    bool
		wantNoDamage bool
	}{
		{name: "whole", pack: whole, idx: goodIdx, wantNoDamage: true},
		{name: "empty index", pack: whole, idx: []byte{}, want: "cannot be read", wantWhole: true},
		{name: "index cut short", pack: whole, idx: goodIdx[:len(goodIdx)/2], want: "cannot be read", wantWhole: true},
		{name: "no index", pack: whole, want: "has no index", wantWhole: true},
		{name: "pack cut short", pack: whole[:len(whole)/2], idx: goodIdx, want: "truncated or corrupt"},
		{name: "empty pack", pack: []byte{}, idx: goodIdx, want: "truncated (0 bytes)"},
		{name: "orphan empty index", pack: whole, idx: goodIdx, orphan: true, want: "has no pack"},
	} {
		write := func(path string, b []byte) {
			os.Remove(path)
			if b != nil {
				if err := os.WriteFile(path, b, 0o444); err != nil {
					t.Fatal(err)
				}
			}
		}
		write(pack, c.pack)
		write(idx, c.idx)
		os.Remove(orphan)
		if c.orphan {
			write(orphan, []byte{})
		}
		list, err := damagedPacks(bare)
		switch {
		case err != nil:
			t.Fatalf("%s: %v", c.name, err)
		case c.wantNoDamage && len(list) > 0:
			t.Fatalf("%s: damage found: %+v", c.name, list)
		case c.wantNoDamage:
		case len(list) != 1 || !strings.Contains(list[0].problem, c.want) || list[0].whole != c.wantWhole:
			t.Fatalf("%s: damage %+v, want one %q whole=%v", c.name, list, c.want, c.wantWhole)
		}
		if c.wantWhole {
			if err := reindexPack(pack); err != nil {
				t.Fatalf("%s: index again: %v", c.name, err)
			}
			if list, err := damagedPacks(bare); err != nil || len(list) > 0 {
				t.Fatalf("%s: after a new index: %v %+v", c.name, err, list)
			}
		}
	}
}
