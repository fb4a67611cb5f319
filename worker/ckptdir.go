package worker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CheckpointDirEnv is the environment variable that names a shell task's
// checkpoint directory, when the worker keeps checkpoints.
const CheckpointDirEnv = "JOBQ_CHECKPOINT_DIR"

// CheckpointMarker is the file a shell task creates in its checkpoint
// directory to have the directory saved now: the worker renames it to
// CheckpointSaving, saves the directory (without either file) and removes
// that. A task that must know its state is saved before it goes on waits
// until neither file exists. Neither file is part of the checkpoint.
const (
	CheckpointMarker = ".jobq-save"
	CheckpointSaving = ".jobq-saving"
)

// checkpointPoll is how often the worker looks for CheckpointMarker.
const checkpointPoll = 50 * time.Millisecond

// ckptDir is a running shell task's checkpoint directory.
type ckptDir struct {
	dir string
	tc  *taskCheckpoint

	mu    sync.Mutex
	saved [sha256.Size]byte // fingerprint of the directory at the last save or restore
}

// newCkptDir makes the task's checkpoint directory and unpacks the
// checkpoint it restored into it.
func newCkptDir(tc *taskCheckpoint) (*ckptDir, error) {
	dir, err := tc.c.dirs.get()
	if err != nil {
		return nil, fmt.Errorf("creating the task's checkpoint directory: %w", err)
	}
	d := &ckptDir{dir: dir, tc: tc}
	if tc.restored != nil {
		if err := untarDir(dir, tc.restored); err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("unpacking the task's checkpoint: %w", err)
		}
	}
	d.saved, _ = fingerprint(dir)
	return d, nil
}

// remove gives the directory back: to the pool when the task left it
// empty, else it is deleted.
func (d *ckptDir) remove() { d.tc.c.dirs.put(d.dir) }

// dirPool keeps the empty checkpoint directories of ended tasks for the
// next ones: creating and removing a directory costs a millisecond or
// more on some disks, which a task that never writes a checkpoint should
// not pay each time. The directories are made in one of the worker's own
// (root), which holds a lock file the worker keeps locked while it lives,
// so that the next worker on the machine deletes what a killed one left
// (sweepCheckpointDirs).
type dirPool struct {
	mu   sync.Mutex
	free []string
	root string
	lock *os.File
}

// ckptRootPattern names the workers' directories in os.TempDir.
const ckptRootPattern = "jobq-checkpoints-*"

// ckptLockName is the file in a worker's directory that it keeps locked.
const ckptLockName = "lock"

// get returns an empty directory.
func (p *dirPool) get() (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		dir := p.free[n-1]
		p.free = p.free[:n-1]
		return dir, nil
	}
	if p.root == "" {
		// Made under another name and locked first, so that no sweep
		// finds it unlocked.
		tmp, err := os.MkdirTemp("", ".jobq-checkpoints-new-*")
		if err != nil {
			return "", err
		}
		lock, err := lockFile(filepath.Join(tmp, ckptLockName))
		if err != nil {
			_ = os.RemoveAll(tmp)
			return "", err
		}
		root := filepath.Join(filepath.Dir(tmp), "jobq-checkpoints-"+strings.TrimPrefix(filepath.Base(tmp), ".jobq-checkpoints-new-"))
		if err := os.Rename(tmp, root); err != nil {
			lock.Close()
			_ = os.RemoveAll(tmp)
			return "", err
		}
		p.root, p.lock = root, lock
	}
	return os.MkdirTemp(p.root, "task-*")
}

// put takes dir back, keeping it when it is empty.
func (p *dirPool) put(dir string) {
	f, err := os.Open(dir)
	if err == nil {
		_, err = f.Readdirnames(1)
		f.Close()
	}
	if err != io.EOF { // not empty, or unreadable
		_ = os.RemoveAll(dir)
		return
	}
	p.mu.Lock()
	p.free = append(p.free, dir)
	p.mu.Unlock()
}

// close removes the worker's directory, the pooled ones with it.
func (p *dirPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, dir := range p.free {
		_ = os.RemoveAll(dir)
	}
	p.free = nil
	if p.root != "" {
		_ = os.RemoveAll(p.root)
		p.lock.Close()
		p.root, p.lock = "", nil
	}
}

// sweepCheckpointDirs deletes the checkpoint directories that workers
// killed on this machine left in os.TempDir (their tasks' checkpoints are
// in the stash, if they were saved): those whose lock file no live worker
// holds. It returns how many it deleted.
func sweepCheckpointDirs() int {
	roots, _ := filepath.Glob(filepath.Join(os.TempDir(), ckptRootPattern))
	n := 0
	for _, root := range roots {
		if lock, err := tryLockFile(filepath.Join(root, ckptLockName)); err == nil {
			if os.RemoveAll(root) == nil {
				n++
			}
			lock.Close()
		}
	}
	return n
}

// saveAtEnd keeps what the task wrote as it stopped (a SIGTERM trap, say),
// or before it failed, for the next attempt; nothing for a success. A nil
// d (no checkpoints) does nothing.
func (d *ckptDir) saveAtEnd(ctx context.Context, stopped bool, werr error) {
	if d == nil || (werr == nil && !stopped) {
		return
	}
	why := "task ended without success"
	if stopped {
		why = "task stopped: " + context.Cause(ctx).Error()
	}
	d.saveIfChanged(ctx, why)
}

// saveIfChanged saves the directory when it differs from what was last
// saved or restored.
func (d *ckptDir) saveIfChanged(ctx context.Context, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fp, err := fingerprint(d.dir)
	if err == nil && fp == d.saved {
		return
	}
	d.saveLocked(ctx, why)
}

// saveLocked archives and saves the directory; d.mu is held.
func (d *ckptDir) saveLocked(ctx context.Context, why string) {
	fp, _ := fingerprint(d.dir)
	body, err := tarDir(d.tc.c.header(d.tc.id), d.dir, d.tc.c.maxBytes)
	if err == nil {
		err = d.tc.saveBody(ctx, body, why)
	}
	if err != nil {
		d.tc.log.Warn("checkpoint not saved; the previous one is kept", "why", why, "error", err)
		return
	}
	d.saved = fp
}

// watch saves the directory every `every` (when it changed; never when
// every is zero) and whenever the task creates CheckpointMarker, until
// stop is closed.
func (d *ckptDir) watch(ctx context.Context, every time.Duration, stop <-chan struct{}) {
	poll := time.NewTicker(checkpointPoll)
	defer poll.Stop()
	var periodic <-chan time.Time
	if every > 0 {
		t := time.NewTicker(every)
		defer t.Stop()
		periodic = t.C
	}
	marker, saving := filepath.Join(d.dir, CheckpointMarker), filepath.Join(d.dir, CheckpointSaving)
	for {
		select {
		case <-stop:
			return
		case <-periodic:
			d.saveIfChanged(ctx, "periodic")
		case <-poll.C:
			if os.Rename(marker, saving) != nil {
				continue
			}
			d.mu.Lock()
			d.saveLocked(ctx, "requested")
			d.mu.Unlock()
			_ = os.Remove(saving)
		}
	}
}

// skipped reports whether the top-level name is a marker, not state.
func skipped(rel string) bool {
	return rel == CheckpointMarker || rel == CheckpointSaving
}

// fingerprint hashes the directory's names, sizes, modes and modification
// times: a change to any file changes it.
func fingerprint(dir string) ([sha256.Size]byte, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." || skipped(rel) {
			return nil // the top directory's time changes with the markers
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00%v\x00%d\n", rel, fi.Size(), fi.Mode(), fi.ModTime().UnixNano())
		return nil
	})
	var fp [sha256.Size]byte
	copy(fp[:], h.Sum(nil))
	return fp, err
}

// errTooLarge stops tarDir at the size limit.
var errTooLarge = errors.New("over the size limit")

// tarDir archives dir (regular files, directories and symbolic links,
// without the markers) after head, failing when the archive would exceed
// limit bytes.
func tarDir(head []byte, dir string, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(head)
	limit += int64(len(head))
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." || skipped(rel) {
			return nil
		}
		if limit > 0 && int64(buf.Len()) > limit {
			return errTooLarge
		}
		return tarEntry(tw, p, filepath.ToSlash(rel), e)
	})
	if err == nil {
		err = tw.Close()
	}
	if errors.Is(err, errTooLarge) || (err == nil && limit > 0 && int64(buf.Len()) > limit) {
		return nil, fmt.Errorf("the checkpoint directory is over the limit of %d bytes (--checkpoint-max-mb)", limit-int64(len(head)))
	}
	if err != nil {
		return nil, fmt.Errorf("archiving the checkpoint directory: %w", err)
	}
	return buf.Bytes(), nil
}

// tarEntry writes the entry e at path p to tw, named name; it skips what
// is not a regular file, a directory or a symbolic link.
func tarEntry(tw *tar.Writer, p, name string, e fs.DirEntry) error {
	fi, err := e.Info()
	if err != nil {
		return err
	}
	var link string
	if fi.Mode()&fs.ModeSymlink != 0 {
		if link, err = os.Readlink(p); err != nil {
			return err
		}
	} else if !fi.Mode().IsRegular() && !fi.IsDir() {
		return nil // sockets, pipes, devices: not state
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	hdr.Name = name
	hdr.Uname, hdr.Gname = "", ""
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	// A file that grows while it is read is cut at its header's size.
	_, err = io.CopyN(tw, f, hdr.Size)
	return err
}

// untarDir unpacks a tarDir archive into dir. It works through an
// os.Root, so no entry (a "..", an absolute name, a symbolic link
// followed) can write outside dir.
func untarDir(dir string, data []byte) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := path.Clean(hdr.Name)
		if !fs.ValidPath(name) {
			return fmt.Errorf("checkpoint entry %s: not a relative path", strconv.Quote(hdr.Name))
		}
		name = filepath.FromSlash(name)
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = root.MkdirAll(name, mode|0o700)
		case tar.TypeSymlink:
			err = root.Symlink(hdr.Linkname, name)
		case tar.TypeReg:
			err = writeEntry(root, name, mode, tr)
		}
		if err != nil {
			return fmt.Errorf("checkpoint entry %s: %w", strconv.Quote(hdr.Name), err)
		}
		if !hdr.ModTime.IsZero() && hdr.Typeflag != tar.TypeSymlink {
			_ = root.Chtimes(name, hdr.ModTime, hdr.ModTime)
		}
	}
}

func writeEntry(root *os.Root, name string, mode fs.FileMode, r io.Reader) error {
	f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode|0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
