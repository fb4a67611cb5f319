package stash

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// FileScheme is the URL scheme of the directory store, built into this
// package and registered on the default URLMux: file:///dir.
const FileScheme = "file"

// FileOpener opens file:///dir URLs (file:relative/dir is accepted too).
type FileOpener struct{}

// OpenStoreURL opens the directory u names; see OpenDir.
func (FileOpener) OpenStoreURL(_ context.Context, u *url.URL) (Store, error) {
	if u.Host != "" && u.Host != "localhost" {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash URL %q names host %q; a file stash is a local path: file:///dir (three slashes)", u.Redacted(), u.Host)
	}
	dir := u.Path
	if dir == "" {
		dir = u.Opaque // file:relative/dir
	}
	return OpenDir(dir)
}

// dirStore keeps objects as files in one directory, for one machine or a
// file system that every producer and worker mounts at the same path.
type dirStore struct {
	dir string
	loc string
}

// OpenDir opens a stash in dir, creating the directory when missing. Objects
// are written to a temporary file and linked into place, so a reader never
// sees a partial object and a second writer of the same object changes
// nothing. They are readable by their owner only (mode 0600): producers and
// workers must run as the same user.
func OpenDir(dir string) (Store, error) {
	if dir == "" {
		return nil, driver.Errorf(errcode.InvalidArgument, "file stash has no directory; use file:///absolute/dir")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, WrapError(errcode.InvalidArgument, err, "file stash directory %q", dir)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, WrapError(errcode.PermissionDenied, err, "cannot create file stash directory %s", abs)
	}
	return &dirStore{dir: abs, loc: (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()}, nil
}

func (s *dirStore) Location() string { return s.loc }

func (s *dirStore) Close() error { return nil }

func (s *dirStore) path(name string) string { return filepath.Join(s.dir, name) }

func (s *dirStore) Put(ctx context.Context, data []byte) (Object, error) {
	name := Sum(data)
	obj := Object{URL: s.loc + "/" + name, SHA256: name, Size: int64(len(data))}
	if err := ctx.Err(); err != nil {
		return Object{}, err
	}
	final := s.path(name)
	if _, err := os.Stat(final); err == nil {
		return obj, nil // content-addressed: already there with these bytes
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-"+name[:16]+"-*")
	if err != nil {
		return Object{}, WrapError(errcode.Unavailable, err, "file stash %s: create object", s.dir)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Object{}, WrapError(errcode.Unavailable, err, "file stash %s: write object", s.dir)
	}
	// Link is create-only: it fails when the name exists (another writer of
	// the same bytes won), which is success here.
	err = os.Link(tmp.Name(), final)
	switch {
	case err == nil:
		obj.Created = true
	case errors.Is(err, fs.ErrExist):
	default:
		// Some shared file systems have no hard links; a rename is atomic
		// too, and replacing an object with identical bytes is harmless.
		// Whether another writer made it first is unknown: not Created.
		if rerr := os.Rename(tmp.Name(), final); rerr != nil {
			return Object{}, WrapError(errcode.Unavailable, rerr, "file stash %s: store object", s.dir)
		}
	}
	return obj, nil
}

func (s *dirStore) Get(ctx context.Context, name string, limit int64) ([]byte, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(s.path(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, NotFoundError(s.loc, name, err)
	}
	if err != nil {
		return nil, WrapError(errcode.Unavailable, err, "file stash %s: open object", s.dir)
	}
	defer f.Close()
	data, err := ReadLimited(f, limit)
	if err != nil {
		return nil, WrapError(errcode.Unavailable, err, "file stash %s: read object", s.dir)
	}
	return data, nil
}

func (s *dirStore) Delete(ctx context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Remove(s.path(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return WrapError(errcode.Unavailable, err, "file stash %s: delete object", s.dir)
	}
	return nil
}

// Replace writes data to a temporary file and renames it over name, which
// POSIX makes atomic.
func (s *dirStore) Replace(ctx context.Context, name string, data []byte) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-"+name[:16]+"-*")
	if err != nil {
		return WrapError(errcode.Unavailable, err, "file stash %s: create object", s.dir)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), s.path(name))
	}
	if err != nil {
		return WrapError(errcode.Unavailable, err, "file stash %s: replace object", s.dir)
	}
	return nil
}
