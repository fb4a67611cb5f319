// Package dirsync implements ai4s-jobq's bg_dirsync_to for shell tasks: the
// task writes into a fresh directory ($AMLT_DIRSYNC_DIR), which is copied to
// a destination directory in the background while the task runs, when the
// task creates .amlt_flush_upload in it, and once more when the task ends.
//
// A copy adds new files and replaces files that changed since they were
// copied (by modification time); nothing is ever deleted from the
// destination. Only local directories (a mounted bucket included) are
// supported as destinations.
package dirsync

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FlushFile is the file a task creates in its directory to have it copied
// at once; it is removed when the copy is done and never copied itself.
const FlushFile = ".amlt_flush_upload"

// Options are the settings ai4s-jobq reads from the task's environment.
type Options struct {
	// Interval between background copies (AMLT_DIRSYNC_FREQ, seconds;
	// default 30).
	Interval time.Duration
	// DeleteAfterCopy removes each source file once copied
	// (AMLT_DELETE_AFTER_COPY=true).
	DeleteAfterCopy bool
	// Exclude lists patterns (path.Match, against the name and the path
	// relative to the directory) of files and directories not copied, unless
	// they also match Include (AMLT_DIRSYNC_EXCLUDE, AMLT_DIRSYNC_INCLUDE;
	// whitespace-separated).
	Include, Exclude []string
}

// OptionsFromEnv reads Options from a task's environment, KEY=VALUE
// entries where the last one of a name wins.
func OptionsFromEnv(env []string) (Options, error) {
	get := func(k string) string {
		v := ""
		for _, kv := range env {
			if name, val, ok := strings.Cut(kv, "="); ok && name == k {
				v = val
			}
		}
		return v
	}
	o := Options{Interval: 30 * time.Second}
	if s := get("AMLT_DIRSYNC_FREQ"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return o, fmt.Errorf("AMLT_DIRSYNC_FREQ=%q: want a whole number of seconds, 1 or more", s)
		}
		o.Interval = time.Duration(n) * time.Second
	}
	switch strings.ToLower(get("AMLT_DELETE_AFTER_COPY")) {
	case "true", "1", "yes", "y":
		o.DeleteAfterCopy = true
	}
	o.Include = strings.Fields(get("AMLT_DIRSYNC_INCLUDE"))
	o.Exclude = strings.Fields(get("AMLT_DIRSYNC_EXCLUDE"))
	return o, nil
}

// CheckDestination rejects destinations dirsync cannot write to.
func CheckDestination(dst string) error {
	if strings.Contains(dst, "://") {
		return fmt.Errorf("bg_dirsync_to %q: only local directories are supported (mount the bucket or share and give its path)", dst)
	}
	if dst == "" {
		return errors.New("bg_dirsync_to is empty")
	}
	return nil
}

// Sync copies Src to Dst in the background until Stop.
type Sync struct {
	src, dst string
	o        Options
	log      *slog.Logger
	mu       sync.Mutex // one copy at a time
	stop     chan struct{}
	done     chan struct{}
}

// Start begins copying src to dst every o.Interval, and whenever FlushFile
// appears in src (checked every second).
func Start(src, dst string, o Options, log *slog.Logger) *Sync {
	if o.Interval <= 0 {
		o.Interval = 30 * time.Second
	}
	s := &Sync{src: src, dst: dst, o: o, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *Sync) loop() {
	defer close(s.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			flush := filepath.Join(s.src, FlushFile)
			_, err := os.Stat(flush)
			if err != nil && now.Sub(last) < s.o.Interval {
				continue
			}
			last = now
			if cerr := s.Copy(context.Background()); cerr != nil {
				s.log.Warn("bg_dirsync_to: copy failed; retrying at the next interval", "from", s.src, "to", s.dst, "error", cerr)
				continue
			}
			if err == nil {
				_ = os.Remove(flush)
			}
		}
	}
}

// Stop ends the background copies and makes the final one, whose error it
// returns: a task whose output did not reach the destination has not
// delivered it.
func (s *Sync) Stop(ctx context.Context) error {
	close(s.stop)
	<-s.done
	return s.Copy(ctx)
}

// Copy copies, once, every file of src that is new or changed to dst.
func (s *Sync) Copy(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	err := filepath.WalkDir(s.src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			errs = append(errs, err)
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.src, p)
		if rel == "." {
			return nil
		}
		if s.skip(d.Name(), filepath.ToSlash(rel)) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if err := s.copyFile(p, filepath.Join(s.dst, rel)); err != nil {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (s *Sync) skip(name, rel string) bool {
	if name == FlushFile {
		return true
	}
	match := func(pats []string) bool {
		for _, p := range pats {
			if ok, _ := path.Match(p, name); ok {
				return true
			}
			if ok, _ := path.Match(p, rel); ok {
				return true
			}
		}
		return false
	}
	return match(s.o.Exclude) && !match(s.o.Include)
}

// copyFile copies src to dst when dst is missing or older, through a
// temporary file renamed into place, keeping src's modification time.
func (s *Sync) copyFile(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if dt, err := os.Stat(dst); err == nil && !st.ModTime().After(dt.ModTime()) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".*.part")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, in)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), st.Mode().Perm())
	}
	if err == nil {
		err = os.Chtimes(tmp.Name(), st.ModTime(), st.ModTime())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	if s.o.DeleteAfterCopy {
		return os.Remove(src)
	}
	return nil
}
