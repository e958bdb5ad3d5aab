package repo

import (
	"bytes"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// Temporary files of pack writes, in objects/pack: git's own prefix, so
// that `git gc` removes what a killed write leaves, and never a name git or
// go-git reads as a pack ("pack-*.pack", "pack-*.idx").
const (
	packTempPattern = "tmp_pack_aq-*"
	idxTempPattern  = "tmp_idx_aq-*"
)

// packHeaderSize and packTrailerSize bound a pack: "PACK", a version and
// an object count, then the objects, then the checksum of all before it.
const (
	packHeaderSize  = 12
	packTrailerSize = 20
)

// PackfileWriter returns the writer go-git fetches a pack into. go-git's
// own writes the pack to a temporary file, but its index in place under
// its final name, before the pack is renamed beside it; and it keeps an
// index that already exists. A daemon killed while the index was written
// left an empty pack-<hash>.idx; the next fetch of the same objects kept
// it and renamed the pack in, and from then on every read of the
// repository failed ("EOF"). This writer writes the pack to a temporary
// file, and on Close checks its checksum, indexes it, writes the index to
// a temporary file and renames the index and then the pack into place,
// each synced first: what git or go-git can see under objects/pack is
// always whole. The index goes first because go-git finds packs by their
// .pack and fails on one without an index, while git finds them by their
// .idx and ignores an index without a pack. A file of the same name is
// replaced, so a damaged one does not survive.
func (s atomicStorage) PackfileWriter() (io.WriteCloser, error) {
	dir := filepath.Join(s.common, "objects", "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("write pack: %w", err)
	}
	f, err := os.CreateTemp(dir, packTempPattern)
	if err != nil {
		return nil, fmt.Errorf("write pack: %w", err)
	}
	return &packWriter{s: s, dir: dir, f: f}, nil
}

// packWriter is the io.WriteCloser of atomicStorage.PackfileWriter.
type packWriter struct {
	s   atomicStorage
	dir string
	f   *os.File
	n   int64
}

func (p *packWriter) Write(b []byte) (int, error) {
	n, err := p.f.Write(b)
	p.n += int64(n)
	return n, err
}

// Close installs the pack when it is whole; an empty one (nothing to
// fetch) is dropped. The temporary file never stays behind.
func (p *packWriter) Close() error {
	defer os.Remove(p.f.Name()) // gone already once renamed
	if p.n == 0 {
		return p.f.Close()
	}
	h, idx, err := indexPack(p.f)
	if err == nil {
		err = p.f.Sync()
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write pack: %w", err)
	}
	base := filepath.Join(p.dir, "pack-"+h.String())
	if err := writeIndex(base+".idx", idx); err != nil {
		return fmt.Errorf("write pack %s: %w", h, err)
	}
	p.step(base + ".idx")
	if err := os.Chmod(p.f.Name(), 0o444); err != nil {
		return fmt.Errorf("write pack %s: %w", h, err)
	}
	if err := os.Rename(p.f.Name(), base+".pack"); err != nil {
		return fmt.Errorf("write pack %s: %w", h, err)
	}
	if err := syncDir(p.dir); err != nil {
		return fmt.Errorf("write pack %s: %w", h, err)
	}
	p.step(base + ".pack")
	// go-git's storage reads the packs it knows of again when next asked.
	p.s.Reindex()
	return nil
}

func (p *packWriter) step(path string) {
	if p.s.packStep != nil {
		p.s.packStep(path)
	}
}

// indexPack checks that the pack in f is whole (its trailer is the
// checksum of all before it) and returns that checksum, its name, and its
// index. It reads f from its start.
func indexPack(f *os.File) (plumbing.Hash, *idxfile.MemoryIndex, error) {
	var h plumbing.Hash
	fi, err := f.Stat()
	if err != nil {
		return h, nil, err
	}
	if fi.Size() < packHeaderSize+packTrailerSize {
		return h, nil, fmt.Errorf("the pack is truncated (%d bytes)", fi.Size())
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return h, nil, err
	}
	sum := sha1.New()
	if _, err := io.CopyN(sum, f, fi.Size()-packTrailerSize); err != nil {
		return h, nil, err
	}
	if _, err := io.ReadFull(f, h[:]); err != nil {
		return h, nil, err
	}
	if !bytes.Equal(sum.Sum(nil), h[:]) {
		return h, nil, errors.New("the pack's checksum does not match its content: it is truncated or corrupt")
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return h, nil, err
	}
	w := new(idxfile.Writer)
	parser, err := packfile.NewParser(packfile.NewScanner(f), w)
	if err != nil {
		return h, nil, err
	}
	got, err := parser.Parse()
	if err != nil {
		return h, nil, fmt.Errorf("read the pack: %w", err)
	}
	if got != h {
		return h, nil, fmt.Errorf("the pack's checksum %s is not its trailer %s", got, h)
	}
	idx, err := w.Index()
	if err != nil {
		return h, nil, err
	}
	return h, idx, nil
}

// writeIndex writes idx to path through a synced temporary file renamed
// over it.
func writeIndex(path string, idx *idxfile.MemoryIndex) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, idxTempPattern)
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone already once renamed
	_, err = idxfile.NewEncoder(tmp).Encode(idx)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o444)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

// syncDir makes the renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// packDamage is a pack of a repository that git or go-git cannot read.
type packDamage struct {
	// pack is the pack's path; idx its index's. An index without a pack
	// (orphan) has pack "".
	pack, idx string
	// problem says what is wrong.
	problem string
	// whole is true when the pack itself is whole: only its index is
	// missing or damaged, and writing it anew repairs the pack.
	whole bool
}

func (d packDamage) name() string {
	if d.pack == "" {
		return filepath.Base(d.idx)
	}
	return filepath.Base(d.pack)
}

// damagedPacks lists the damaged packs under objects/pack of the common
// git directory common: a pack whose index is missing, unreadable or of
// another pack, a pack shorter than its index says or whose trailer is not
// the checksum its index holds, and an index without a pack that cannot
// be read (git and go-git keep such an index when they fetch its pack
// later). It reads each index and each pack's header and trailer; only a
// damaged pack is read whole, to tell whether its index alone is at fault.
func damagedPacks(common string) ([]packDamage, error) {
	dir := filepath.Join(common, "objects", "pack")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, e := range entries {
		names[e.Name()] = true
	}
	var list []packDamage
	for _, e := range entries {
		n := e.Name()
		stem, isPack := strings.CutSuffix(n, ".pack")
		stemIdx, isIdx := strings.CutSuffix(n, ".idx")
		switch {
		case isPack && strings.HasPrefix(n, "pack-"):
			d := packDamage{pack: filepath.Join(dir, n), idx: filepath.Join(dir, stem+".idx")}
			if d.problem = checkPack(d.pack, d.idx, stem); d.problem != "" {
				d.whole = packIsWhole(d.pack, stem)
				list = append(list, d)
			}
		case isIdx && strings.HasPrefix(n, "pack-") && !names[stemIdx+".pack"]:
			if _, err := readIndex(filepath.Join(dir, n)); err != nil {
				list = append(list, packDamage{idx: filepath.Join(dir, n),
					problem: fmt.Sprintf("the index %s has no pack and cannot be read (%v)", n, err)})
			}
		}
	}
	return list, nil
}

// checkPack returns what is wrong with the pack at path and its index, or
// "" when both look whole; stem is "pack-<hash>".
func checkPack(pack, idxPath, stem string) string {
	base := filepath.Base(pack)
	idx, err := readIndex(idxPath)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Sprintf("the pack %s has no index", base)
	}
	if err != nil {
		return fmt.Sprintf("the index of %s cannot be read (%v)", base, err)
	}
	if "pack-"+plumbing.Hash(idx.PackfileChecksum).String() != stem {
		return fmt.Sprintf("the index of %s is the index of another pack", base)
	}
	f, err := os.Open(pack)
	if err != nil {
		return fmt.Sprintf("the pack %s cannot be read (%v)", base, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("the pack %s cannot be read (%v)", base, err)
	}
	if fi.Size() < packHeaderSize+packTrailerSize {
		return fmt.Sprintf("the pack %s is truncated (%d bytes)", base, fi.Size())
	}
	head := make([]byte, packHeaderSize)
	trailer := make([]byte, packTrailerSize)
	if _, err := f.ReadAt(head, 0); err != nil {
		return fmt.Sprintf("the pack %s cannot be read (%v)", base, err)
	}
	if _, err := f.ReadAt(trailer, fi.Size()-packTrailerSize); err != nil {
		return fmt.Sprintf("the pack %s cannot be read (%v)", base, err)
	}
	count, err := idx.Count()
	if err != nil {
		return fmt.Sprintf("the index of %s cannot be read (%v)", base, err)
	}
	switch {
	case string(head[:4]) != "PACK":
		return fmt.Sprintf("the pack %s does not start as a pack", base)
	case beUint32(head[8:]) != uint32(count):
		return fmt.Sprintf("the pack %s holds %d objects, its index %d", base, beUint32(head[8:]), count)
	case !bytes.Equal(trailer, idx.PackfileChecksum[:]):
		return fmt.Sprintf("the pack %s does not end with its checksum: it is truncated or corrupt", base)
	}
	return ""
}

func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// readIndex decodes the pack index at path (the decoder checks its
// checksum).
func readIndex(path string) (*idxfile.MemoryIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(f).Decode(idx); err != nil {
		return nil, err
	}
	return idx, nil
}

// packIsWhole reports whether the pack at path is whole and named after
// its checksum, stem being "pack-<hash>": its index can be written anew.
func packIsWhole(path, stem string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	h, _, err := indexPack(f)
	return err == nil && "pack-"+h.String() == stem
}

// reindexPack writes the index of the whole pack at path anew.
func reindexPack(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	h, idx, err := indexPack(f)
	if err != nil {
		return err
	}
	if want := strings.TrimSuffix(filepath.Base(path), ".pack"); "pack-"+h.String() != want {
		return fmt.Errorf("the pack %s has the checksum %s", filepath.Base(path), h)
	}
	return writeIndex(strings.TrimSuffix(path, ".pack")+".idx", idx)
}

// packSiblings are the files git keeps beside a pack, by extension.
var packSiblings = []string{".pack", ".idx", ".rev", ".bitmap", ".keep", ".promisor", ".mtimes"}

// quarantinePacks moves the damaged packs (by name, with their index and
// the files git keeps beside them) out of objects/pack of the common git
// directory common into common/aq-damaged-packs, where neither git nor
// go-git reads them.
func quarantinePacks(common string, list []packDamage) error {
	dst := filepath.Join(common, quarantineDir)
	if err := os.MkdirAll(dst, 0o700); err != nil {
		return err
	}
	dir := filepath.Join(common, "objects", "pack")
	for _, d := range list {
		stem := strings.TrimSuffix(strings.TrimSuffix(d.name(), ".pack"), ".idx")
		for _, ext := range packSiblings {
			p := filepath.Join(dir, stem+ext)
			if err := os.Rename(p, filepath.Join(dst, stem+ext)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}
