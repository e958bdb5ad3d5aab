package repo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
)

// atomicStorage is a repository's go-git storage whose writes are atomic,
// as git's own are: a reference's new value is written to a temporary file
// beside the repository's refs and renamed over the reference, and a
// fetched pack and its index are written to temporary files and renamed
// into objects/pack only when complete (see PackfileWriter). go-git
// truncates a reference file and writes it in place, so a daemon killed
// between the two left an empty reference that broke every later fetch
// into that repository ("ref file is empty"), and with it every delivery
// of its project; its pack index is written in place likewise.
type atomicStorage struct {
	*filesystem.Storage
	gitDir string // the repository's (or worktree's) own directory
	common string // its common directory: where shared refs and objects live
	// packStep, set by tests, runs after each file a pack write renames
	// into objects/pack, with the file's path.
	packStep func(path string)
}

// withAtomicStorage returns r's storage with atomic reference and pack
// writes; path is the repository's directory (a working tree, a worktree
// or a bare repository).
func withAtomicStorage(r *git.Repository, path string) (atomicStorage, error) {
	fsys, ok := r.Storer.(*filesystem.Storage)
	if !ok {
		return atomicStorage{}, fmt.Errorf("repository %s: unexpected storage %T", path, r.Storer)
	}
	gitDir, common, err := gitDirs(path)
	if err != nil {
		return atomicStorage{}, err
	}
	return atomicStorage{Storage: fsys, gitDir: gitDir, common: common}, nil
}

// SetReference stores ref atomically.
func (s atomicStorage) SetReference(ref *plumbing.Reference) error {
	return s.CheckAndSetReference(ref, nil)
}

// CheckAndSetReference stores ref atomically when the reference is still
// at old (any value when old is nil).
func (s atomicStorage) CheckAndSetReference(ref, old *plumbing.Reference) error {
	if ref == nil {
		return nil
	}
	name := ref.Name()
	if err := name.Validate(); err != nil || !strings.HasPrefix(name.String(), "refs/") {
		return fmt.Errorf("set reference %q: not a valid reference name", name)
	}
	if old != nil {
		cur, err := s.Storage.Reference(old.Name())
		if err != nil {
			return fmt.Errorf("set reference %s: %w", name, err)
		}
		if cur.Hash() != old.Hash() {
			return storage.ErrReferenceHasChanged
		}
	}
	var content string
	switch ref.Type() {
	case plumbing.HashReference:
		content = ref.Hash().String() + "\n"
	case plumbing.SymbolicReference:
		content = "ref: " + ref.Target().String() + "\n"
	default:
		return fmt.Errorf("set reference %s: invalid reference type", name)
	}
	dir := s.common
	if perWorktreeRef(name.String()) {
		dir = s.gitDir
	}
	target := filepath.Join(dir, filepath.FromSlash(name.String()))
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return fmt.Errorf("set reference %s: %w", name, err)
	}
	// The temporary file is outside refs/, where git and go-git would read
	// it as a reference, and on the same file system as its target.
	tmp, err := os.CreateTemp(dir, refTempPattern)
	if err != nil {
		return fmt.Errorf("set reference %s: %w", name, err)
	}
	_, werr := tmp.WriteString(content)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("set reference %s: %w", name, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("set reference %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("set reference %s: %w", name, err)
	}
	return nil
}

// refTempPattern names the temporary files of reference writes.
const refTempPattern = "aq-ref-*.tmp"

// perWorktreeRef reports whether a reference lives in a worktree's own
// directory rather than the common one (git's worktree.c rules).
func perWorktreeRef(name string) bool {
	for _, p := range []string{"refs/bisect/", "refs/worktree/", "refs/rewritten/"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// removeEmptyRefs removes the empty loose reference files under the refs/
// of the git directories of path: what a write killed midway left before
// writes were atomic. git treats such a file as a broken reference and
// go-git fails every listing of the repository's references on it; without
// it the reference is its packed value or absent, and the next fetch
// writes it again. It returns the names removed.
func removeEmptyRefs(path string) ([]string, error) {
	gitDir, common, err := gitDirs(path)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, dir := range []string{common, gitDir} {
		root := filepath.Join(dir, "refs")
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			if !d.Type().IsRegular() || strings.HasSuffix(p, ".lock") {
				return nil
			}
			info, err := d.Info()
			if err != nil || info.Size() != 0 {
				return nil
			}
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			removed = append(removed, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return removed, fmt.Errorf("repair the references of %s: %w", path, err)
		}
		if gitDir == common {
			break
		}
	}
	return removed, nil
}

// isEmptyRef reports whether err is go-git's refusal of an empty
// reference file.
func isEmptyRef(err error) bool { return errors.Is(err, dotgit.ErrEmptyRefFile) }
