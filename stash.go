package jobq

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/redact"
	"github.com/jobq/jobq/stash"
)

// The large-payload stash (claim check), see docs/stash.md. On push, a task
// whose encoding exceeds the backend's MaxMessageBytes is stored in the
// queue's stash and a small schema-v2 message carrying Task.Stash is queued
// instead; on receive, the object is fetched and verified before the task
// reaches the caller; Complete and dead-letter Purge delete it.

// stashParam is the portable query parameter naming the stash; it is taken
// out of the URL before the driver sees it.
const stashParam = "stash"

// deadScan bounds how many dead letters Purge reads to find stash objects to
// delete; objects of dead letters beyond it are left to the bucket's
// lifecycle rule.
const deadScan = 1000

// stashes are a queue's stores: the configured one, where pushes go, and
// any others that received references point at (opened on first use).
type stashes struct {
	primary stash.Store // nil when no stash is configured
	mux     *stash.URLMux

	mu     sync.Mutex
	others map[string]stash.Store // by location
}

// takeStashParam removes the stash= parameter from u and returns the stash
// location to use: explicit (Options.StashURL) wins over the parameter.
func takeStashParam(u *url.URL, explicit string) string {
	q := u.Query()
	param, has := q[stashParam]
	if !has {
		return explicit
	}
	q.Del(stashParam)
	u.RawQuery = q.Encode()
	if explicit != "" || len(param) == 0 {
		return explicit
	}
	return param[len(param)-1]
}

// openStashes opens the configured store, if any.
func openStashes(ctx context.Context, mux *stash.URLMux, location, queue string) (*stashes, error) {
	if mux == nil {
		mux = stash.DefaultURLMux()
	}
	s := &stashes{mux: mux, others: map[string]stash.Store{}}
	if location == "" {
		return s, nil
	}
	st, err := mux.Open(ctx, location)
	if err != nil {
		// The mux's and the stores' errors name the stash already.
		return nil, &Error{Code: errcode.Of(err), Op: "open", Queue: queue, Err: err}
	}
	s.primary = st
	return s, nil
}

// store returns the store holding objectURL.
func (s *stashes) store(ctx context.Context, objectURL string) (stash.Store, error) {
	loc, _, err := stash.Split(objectURL)
	if err != nil {
		return nil, err
	}
	if s.primary != nil && s.primary.Location() == loc {
		return s.primary, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.others[loc]; ok {
		return st, nil
	}
	// A scheme this program did not register is its own configuration
	// problem, not the message's: Unimplemented leaves the message for a
	// receiver that has the store instead of dead-lettering it.
	if u, err := url.Parse(loc); err == nil && u.Scheme != "" && !s.mux.ValidScheme(u.Scheme) {
		return nil, &Error{Code: errcode.Unimplemented, Op: "receive", Msg: fmt.Sprintf(
			"the task is in a %s:// stash, but this program registers no store for that scheme (registered: %s); import github.com/jobq/jobq/stash/all, or the store's package (the jobq CLI has every store)",
			u.Scheme, strings.Join(s.mux.Schemes(), ", "))}
	}
	st, err := s.mux.Open(ctx, loc)
	if err != nil {
		return nil, err
	}
	s.others[loc] = st
	return st, nil
}

func (s *stashes) close() {
	if s.primary != nil {
		_ = s.primary.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.others {
		_ = st.Close()
	}
	s.others = map[string]stash.Store{}
}

// oversized handles a task whose encoding exceeds the backend's limit: it
// moves the body to the stash and returns the reference message, or fails
// with TooLarge when no stash is configured. created is the reference when
// this call wrote the object (see stash.Object.Created), for the caller to
// remove should the push be refused; an object it wrote for a reference
// it then refuses, it removes itself.
func (q *Queue) oversized(ctx context.Context, t *Task, body []byte) (small []byte, created *StashRef, err error) {
	limit := q.caps.MaxMessageBytes
	if q.stash.primary == nil {
		return nil, nil, &Error{Code: errcode.TooLarge, Op: "push", Queue: q.url, Msg: fmt.Sprintf(
			"task %s is %d bytes encoded, over this backend's limit of %d bytes; configure a stash for large payloads (--stash gs://bucket/prefix, azblob://account/container/prefix or file:///dir, $JOBQ_STASH, or stash= in the queue URL)",
			t.ID, len(body), limit)}
	}
	obj, err := q.stash.primary.Put(ctx, body)
	if err != nil {
		return nil, nil, &Error{Code: errcode.Of(err), Op: "push", Queue: q.url, Err: err, Msg: fmt.Sprintf(
			"task %s is %d bytes, over this backend's limit of %d, and storing it in stash %s failed: %v",
			t.ID, len(body), limit, q.stash.primary.Location(), err)}
	}
	stashed := &StashRef{URL: obj.URL, SHA256: obj.SHA256, Size: obj.Size}
	if obj.Created {
		defer func() {
			if err != nil {
				q.dropRefused(ctx, stashed)
			}
		}()
	}
	// The reference keeps what the backend schedules by, and the kind,
	// which bulk actions filter by; the rest of the task is in the object.
	ref := &Task{
		ID:             t.ID,
		Kind:           t.Kind,
		Payload:        json.RawMessage(`{}`),
		NumRetries:     t.NumRetries,
		ReplyRequested: t.ReplyRequested,
		Priority:       t.Priority,
		NotBefore:      t.NotBefore,
		ConcurrencyKey: t.ConcurrencyKey,
		RateLimitKey:   t.RateLimitKey,
		Stash:          stashed,
	}
	small, err = encodeTask(ref)
	if err != nil {
		return nil, nil, err
	}
	if len(small) > limit {
		return nil, nil, &Error{Code: errcode.TooLarge, Op: "push", Queue: q.url, Msg: fmt.Sprintf(
			"task %s was stashed, but even its reference message is %d bytes, over this backend's limit of %d bytes (shorten the task ID or keys)",
			t.ID, len(small), limit)}
	}
	if obj.Created {
		created = stashed
	}
	return small, created, nil
}

// stashCleanupTimeout bounds the deletion of a refused push's stash
// objects, which runs even when the push's context has ended.
const stashCleanupTimeout = 10 * time.Second

// dropRefused deletes the stash objects that a push wrote for messages
// that were certainly not stored (see pushRefused), logging failures. No
// stored message refers to them: the objects were written by this push
// (stash.Object.Created), and a message of the same task pushed since
// would have found the object there and left it to this one. (A
// concurrent push of the same task, finding the object in the moment
// before it is deleted, loses it: its message becomes poison.)
func (q *Queue) dropRefused(ctx context.Context, refs ...*StashRef) {
	if len(refs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stashCleanupTimeout)
	defer cancel()
	q.dropStashed(ctx, refs...)
}

// pushRefused reports whether err, a push's error, means that the
// messages the driver did not report stored were certainly not stored
// (driver.AppliedOf): after an unknown outcome a stored message may refer
// to its stash object, which is then kept.
func pushRefused(err error) bool {
	return !maybeApplied(err) && driver.AppliedOf(err, errcode.Of(err)) == driver.NotApplied
}

// resolve turns a task as it was on the wire into the task users see. It is
// the identity unless the task's payload was moved to a stash; then the
// object is fetched and verified. A missing or altered object is an error
// with code NotFound or InvalidArgument (the message is poison); other
// errors mean the stash could not be reached.
func (q *Queue) resolve(ctx context.Context, wire *Task) (*Task, error) {
	ref := wire.Stash
	if ref == nil {
		return wire, nil
	}
	fail := func(err error, format string, args ...any) error {
		return &Error{Code: errcode.Of(err), Op: "receive", Queue: q.url, Err: err,
			Msg: fmt.Sprintf("task %s: ", wire.ID) + fmt.Sprintf(format, args...)}
	}
	st, err := q.stash.store(ctx, ref.URL)
	if err != nil {
		return nil, fail(err, "cannot open its stash: %v", err)
	}
	data, err := stash.Load(ctx, st, ref.URL, ref.SHA256, ref.Size)
	if err != nil {
		return nil, fail(err, "%v", err)
	}
	task, err := unmarshalTask(data)
	if err != nil {
		return nil, fail(err, "stashed object %s does not decode: %v", ref.URL, err)
	}
	if task.Stash != nil || task.ID != wire.ID {
		return nil, errorf(errcode.InvalidArgument, "receive", "task %s: stashed object %s holds task %s, not the task itself", wire.ID, ref.URL, task.ID)
	}
	// The message's retry budget is the live one: Fail decrements it there.
	task.NumRetries = wire.NumRetries
	return task, nil
}

// stashPoison reports whether a resolve error makes the message poison
// (the object is missing or altered) rather than worth another try later.
func stashPoison(err error) bool {
	switch errcode.Of(err) {
	case errcode.NotFound, errcode.InvalidArgument, errcode.FailedPrecondition:
		return true
	}
	return false
}

// dropStashed deletes the stash object of a settled task, logging failures:
// the task is done either way, and a bucket lifecycle rule catches orphans.
func (q *Queue) dropStashed(ctx context.Context, refs ...*StashRef) {
	for _, ref := range refs {
		if ref == nil {
			continue
		}
		st, err := q.stash.store(ctx, ref.URL)
		if err == nil {
			_, name, _ := stash.Split(ref.URL)
			err = st.Delete(ctx, name)
		}
		if err != nil {
			q.log.Warn("jobq: could not delete a stash object; a bucket lifecycle rule will have to remove it", "object", redact.URL(ref.URL), "error", err)
		}
	}
}

// stashedDeadLetters returns the stash references of the named dead letters
// (all when ids is empty), so that Purge can delete their objects, with
// the IDs of their tasks. An object that a dead letter left in place
// refers to too is not returned. It reads at most deadScan dead letters,
// and none when no stash is configured.
func (q *Queue) stashedDeadLetters(ctx context.Context, ids []string) (refs []*StashRef, taskIDs []string) {
	if q.stash.primary == nil {
		return nil, nil
	}
	ms, err := q.drv.ListDead(ctx, deadScan)
	if err != nil {
		q.log.Warn("jobq: could not list dead letters to find their stash objects; a bucket lifecycle rule will have to remove them", "error", err)
		return nil, nil
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	kept := map[string]bool{} // objects of the dead letters not purged
	for _, m := range ms {
		t, err := unmarshalTask(m.Body)
		switch {
		case err != nil || t.Stash == nil:
		case len(want) > 0 && !want[m.MessageID]:
			kept[t.Stash.SHA256] = true
		default:
			refs, taskIDs = append(refs, t.Stash), append(taskIDs, t.ID)
		}
	}
	n := 0
	for i, ref := range refs {
		if !kept[ref.SHA256] {
			refs[n], taskIDs[n] = ref, taskIDs[i]
			n++
		}
	}
	return refs[:n], taskIDs[:n]
}

// unqueuedStash returns those of refs, the objects of the dead letters
// of the tasks taskIDs, that no queued, delayed, running or held task
// with the same ID refers to: the same task pushed again while its
// dead letter was kept shares its object (objects are named by content),
// and deleting it would make the new message poison. On a backend that
// cannot look tasks up by ID, refs are returned as they are.
func (q *Queue) unqueuedStash(ctx context.Context, op string, refs []*StashRef, taskIDs []string) []*StashRef {
	if len(refs) == 0 {
		return nil
	}
	present, ok, err := q.presentTasks(ctx, op, taskIDs)
	if err != nil {
		q.log.Warn("jobq: could not tell whether the purged dead letters' tasks were pushed again; their stash objects are kept for a bucket lifecycle rule to remove", "error", err)
		return nil
	}
	if !ok {
		return refs
	}
	n := 0
	for i, ref := range refs {
		if !present[taskIDs[i]] {
			refs[n] = ref
			n++
		}
	}
	return refs[:n]
}
