// Package stash keeps task bodies that are too large for a queue's messages
// (the claim-check pattern). The portable layer stores the full encoded task
// in a Store, named by the SHA-256 of its bytes, and queues a small message
// that carries the object's URL, checksum and size; the receiver fetches the
// object, verifies it and hands the full task on.
//
// Stores are chosen by URL scheme, like backends. This package has the
// directory store (file:///dir) built in; the others live in their own
// packages, so that a program links only the cloud SDKs it uses, and
// register their scheme on the default URLMux when imported:
//
//	import _ "github.com/jobq/jobq/stash/gcs"    // gs://bucket/prefix
//	import _ "github.com/jobq/jobq/stash/azblob" // azblob://account/container/prefix
//	import _ "github.com/jobq/jobq/stash/all"    // every store
//
// Writes are create-only, so pushing the same task twice stores it once.
//
// # Writing a store
//
// A store implements Store and registers a URLOpener for its scheme with
// Register (or on its own URLMux). Object names are SHA-256 hex digests
// (check them with CheckName before touching anything); a missing object is
// reported with NotFoundError, other failures with a *driver.Error whose
// code says whether trying again can help (Unavailable) or not. The
// stashtest package checks a store against this contract.
package stash

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Store is a place for large task bodies. Implementations must be safe for
// concurrent use.
type Store interface {
	// Put stores data under its SHA-256 name unless an object of that name
	// already exists (which then holds the same bytes, and is left as it
	// is), and returns where it is. It may be retried after an ambiguous
	// failure: the second attempt finds the object and succeeds. It sets
	// Object.Created only when this call wrote the object.
	Put(ctx context.Context, data []byte) (Object, error)
	// Get returns the object with the given name (a SHA-256 hex digest),
	// reading at most limit bytes (limit < 0: all of it); a missing object
	// is a NotFound error (see NotFoundError).
	Get(ctx context.Context, name string, limit int64) ([]byte, error)
	// Delete removes the named object; a missing object is not an error.
	Delete(ctx context.Context, name string) error
	// Location is the store's URL (gs://bucket/prefix, file:///dir, ...),
	// without credentials, such that opening it with Open reaches the same
	// objects; an object's URL is Location + "/" + name.
	Location() string
	// Close releases what the store opened itself; a client the caller
	// passed in stays open.
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
	// Created is true when the Put that returned the Object wrote it, and
	// false when the object was there already (another message may refer
	// to it) or the store cannot tell. The portable layer deletes the
	// object of a refused push only when it is true.
	Created bool
}

// Env is the environment variable the CLI reads the stash location from
// when --stash is not given.
const Env = "JOBQ_STASH"

// Open opens the store at rawURL through the default URLMux: file:///dir
// always, and the schemes of the store packages the program imports
// (gs://, azblob://; stash/all imports every one).
func Open(ctx context.Context, rawURL string) (Store, error) {
	return DefaultURLMux().Open(ctx, rawURL)
}

// Split divides an object URL into its store's location and its name. It
// fails unless the name is a SHA-256 hex digest, so that a crafted
// reference cannot make a receiver read or delete anything else.
func Split(objectURL string) (location, name string, err error) {
	i := strings.LastIndex(objectURL, "/")
	if i < 0 || !IsName(objectURL[i+1:]) {
		return "", "", driver.Errorf(errcode.InvalidArgument, "stash reference %q does not end in a SHA-256 object name", objectURL)
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

// CheckName returns an InvalidArgument error unless name is an object name
// (a lower-case SHA-256 hex digest). Stores call it before Get and Delete.
func CheckName(name string) error {
	if !IsName(name) {
		return driver.Errorf(errcode.InvalidArgument, "stash object name %q is not a SHA-256 digest", name)
	}
	return nil
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
		return nil, driver.Errorf(errcode.InvalidArgument, "stash reference %s names object %s but carries checksum %s", objectURL, name, sha)
	}
	if size < 0 {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash reference %s has negative size %d", objectURL, size)
	}
	data, err := s.Get(ctx, name, size+1)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != size {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash object %s is %d bytes, but the message says %d (the object was replaced or truncated)", objectURL, len(data), size)
	}
	if got := Sum(data); got != sha {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash object %s has SHA-256 %s, but the message says %s (the object was modified)", objectURL, got, sha)
	}
	return data, nil
}

// ReadLimited reads r up to limit bytes (limit < 0: no limit), as Get
// implementations must.
func ReadLimited(r io.Reader, limit int64) ([]byte, error) {
	if limit >= 0 {
		r = io.LimitReader(r, limit)
	}
	return io.ReadAll(r)
}

// NotFoundError is the NotFound error a store returns for a missing object
// at location (its Location()) named name; cause is kept for errors.As.
func NotFoundError(location, name string, cause error) error {
	return &driver.Error{Code: errcode.NotFound, Msg: fmt.Sprintf("stash object %s/%s does not exist (deleted after the task completed, or removed by a lifecycle rule)", location, name), Err: cause}
}

// WrapError gives err the code, with a message made from format and args
// followed by err's own, keeping err for errors.As. An err that already
// carries a code (a *driver.Error) is returned unchanged.
func WrapError(code errcode.Code, err error, format string, args ...any) error {
	var de *driver.Error
	if errors.As(err, &de) {
		return err
	}
	return &driver.Error{Code: code, Msg: fmt.Sprintf(format, args...) + ": " + err.Error(), Err: err}
}
