// Package stash keeps task bodies that are too large for a queue's messages
// (the claim-check pattern). The portable layer stores the full encoded task
// in a Store, named by the SHA-256 of its bytes, and queues a small message
// that carries the object's URL, checksum and size; the receiver fetches the
// object, verifies it and hands the full task on.
//
// Two stores exist: Google Cloud Storage (gs://bucket/prefix) and a
// directory on a local or shared file system (file:///dir). Writes are
// create-only, so pushing the same task twice stores it once.
package stash

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/jobq/jobq/driver"
)

// Store is a place for large task bodies. Implementations must be safe for
// concurrent use.
type Store interface {
	// Put stores data under its SHA-256 name unless an object of that name
	// already exists (which then holds the same bytes), and returns where it
	// is.
	Put(ctx context.Context, data []byte) (Object, error)
	// Get returns the object with the given name (a SHA-256 hex digest),
	// reading at most limit bytes; a missing object is a NotFound error.
	Get(ctx context.Context, name string, limit int64) ([]byte, error)
	// Delete removes the named object; a missing object is not an error.
	Delete(ctx context.Context, name string) error
	// Location is the store's URL (gs://bucket/prefix or file:///dir),
	// without credentials; an object's URL is Location + "/" + name.
	Location() string
	// Close releases the store's connections.
	Close() error
}

// Object describes one stored body.
type Object struct {
	// URL is Location()/<sha256>.
	URL string
	// SHA256 is the hex SHA-256 of the stored bytes, also the object's name.
	SHA256 string
	// Size is the stored size in bytes.
	Size int64
}

// Env is the environment variable the CLI reads the stash location from
// when --stash is not given.
const Env = "JOBQ_STASH"

// Open opens the store at rawURL: gs://bucket[/prefix] or file:///dir (a
// directory, created when missing). For gs:// it uses application default
// credentials and honours STORAGE_EMULATOR_HOST.
func Open(ctx context.Context, rawURL string) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, driver.Errorf(driver.InvalidArgument, "stash URL %q does not parse: %v; use gs://bucket/prefix or file:///dir", rawURL, err)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, driver.Errorf(driver.InvalidArgument, "stash URL %q has a query or fragment; use gs://bucket/prefix or file:///dir", rawURL)
	}
	switch strings.ToLower(u.Scheme) {
	case "gs":
		if u.Host == "" {
			return nil, driver.Errorf(driver.InvalidArgument, "stash URL %q names no bucket; use gs://bucket/prefix", rawURL)
		}
		return OpenGCS(ctx, u.Host, u.Path, GCSOptions{})
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return nil, driver.Errorf(driver.InvalidArgument, "stash URL %q names host %q; a file stash is a local path: file:///dir (three slashes)", rawURL, u.Host)
		}
		dir := u.Path
		if dir == "" {
			dir = u.Opaque // file:relative/dir
		}
		return OpenDir(dir)
	default:
		return nil, driver.Errorf(driver.InvalidArgument, "stash URL %q has unknown scheme %q; use gs://bucket/prefix or file:///dir", rawURL, u.Scheme)
	}
}

// Split divides an object URL into its store's location and its name. It
// fails unless the name is a SHA-256 hex digest, so that a crafted
// reference cannot make a receiver read or delete anything else.
func Split(objectURL string) (location, name string, err error) {
	i := strings.LastIndex(objectURL, "/")
	if i < 0 || !IsName(objectURL[i+1:]) {
		return "", "", driver.Errorf(driver.InvalidArgument, "stash reference %q does not end in a SHA-256 object name", objectURL)
	}
	return objectURL[:i], objectURL[i+1:], nil
}

// IsName reports whether name is a lower-case SHA-256 hex digest.
func IsName(name string) bool {
	if len(name) != sha256.Size*2 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Sum returns the hex SHA-256 of data: its object name.
func Sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// Load fetches the object a message refers to and verifies it. A missing
// object is a NotFound error and a size or checksum mismatch an
// InvalidArgument error, both of which make the message poison; other
// errors (the store unreachable, say) are worth retrying later.
func Load(ctx context.Context, s Store, objectURL, sha string, size int64) ([]byte, error) {
	_, name, err := Split(objectURL)
	if err != nil {
		return nil, err
	}
	if name != sha {
		return nil, driver.Errorf(driver.InvalidArgument, "stash reference %s names object %s but carries checksum %s", objectURL, name, sha)
	}
	if size < 0 {
		return nil, driver.Errorf(driver.InvalidArgument, "stash reference %s has negative size %d", objectURL, size)
	}
	data, err := s.Get(ctx, name, size+1)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != size {
		return nil, driver.Errorf(driver.InvalidArgument, "stash object %s is %d bytes, but the message says %d (the object was replaced or truncated)", objectURL, len(data), size)
	}
	if got := Sum(data); got != sha {
		return nil, driver.Errorf(driver.InvalidArgument, "stash object %s has SHA-256 %s, but the message says %s (the object was modified)", objectURL, got, sha)
	}
	return data, nil
}

// readLimited reads r up to limit bytes (limit < 0: no limit).
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	if limit >= 0 {
		r = io.LimitReader(r, limit)
	}
	return io.ReadAll(r)
}

// notFound makes the NotFound error for a missing object.
func notFound(loc, name string, err error) error {
	return &driver.Error{Code: driver.NotFound, Msg: fmt.Sprintf("stash object %s/%s does not exist (deleted after the task completed, or removed by a bucket lifecycle rule)", loc, name), Err: err}
}

// wrap gives err a code, keeping it for errors.As.
func wrap(code driver.Code, err error, format string, args ...any) error {
	var de *driver.Error
	if errors.As(err, &de) {
		return err
	}
	return &driver.Error{Code: code, Msg: fmt.Sprintf(format, args...) + ": " + err.Error(), Err: err}
}
