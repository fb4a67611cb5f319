package blobresults

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Held tasks on the Azure backends (driver.Dependencies Emulated,
// driver.HeldStore) are blobs of the record container:
// held/HEX, HEX the task ID's bytes in hex (so that the container's
// lexicographic listing is the IDs' order), whose body is the message and
// its conditions (heldDoc). Hold creates the blob with If-None-Match: *
// (a second Hold of the ID is a duplicate), having first recorded a
// grouped task as its group's member, as a push does (so the group stays
// open until the task's record says it ended).
//
// Release claims each blob (metadata heldClaim = "OWNER UNIXMS", written
// If-Match its ETag, so one sweeper wins), pushes the claimed messages
// through the driver's Push, then deletes the blobs (If-Match the claim).
// A claim older than heldClaimGrace is the claimer's death and may be
// taken over: if it died after its push, the task is pushed twice (at
// least once, never lost). Drop deletes the blob If-Match what it read,
// not while it is claimed, and writes a grouped task's cancelled record
// when the caller did not (create only).
const heldPrefix = "held/"

// heldClaim is the metadata key of a release's claim.
const heldClaim = "jobqreleasing"

// heldClaimGrace is how long a claim stands before another sweeper may
// take the release over.
const heldClaimGrace = driver.ScheduleClaimGrace

// MaxHeldIDLen bounds the ID of a held task: its blob name is the ID in
// hex, and Azure's blob names are at most 1,024 characters.
const MaxHeldIDLen = 500

// heldIdleRecheck is how long a store that listed no held task answers
// ListHeld from that (no request) until it holds one itself: a worker's
// sweep every 2 s would otherwise cost a blob listing each (List Blobs is
// billed as a write), 1,800 an hour per worker, on queues that hold none.
const heldIdleRecheck = 30 * time.Second

// heldCacheMax bounds the held messages ListHeld keeps decoded.
const heldCacheMax = 20000

// heldName is the blob of held task id.
func heldName(id string) string { return heldPrefix + hex.EncodeToString([]byte(id)) }

// heldDoc is a held blob's body.
type heldDoc struct {
	Version        int                `json:"v"`
	ID             string             `json:"id"`
	Body           []byte             `json:"body"`
	Priority       int                `json:"priority,omitempty"`
	NotBefore      time.Time          `json:"not_before,omitzero"`
	ConcurrencyKey string             `json:"concurrency_key,omitempty"`
	RateLimitKey   string             `json:"rate_limit_key,omitempty"`
	TraceParent    string             `json:"traceparent,omitempty"`
	Group          string             `json:"group,omitempty"`
	After          []string           `json:"after,omitempty"`
	AfterGroups    []string           `json:"after_groups,omitempty"`
	Require        driver.HeldRequire `json:"require,omitempty"`
	Created        time.Time          `json:"created"`
}

func encodeHeld(h *driver.HeldMessage) ([]byte, error) {
	m := h.Message
	return json.Marshal(heldDoc{Version: 1, ID: m.ID, Body: m.Body, Priority: m.Priority, NotBefore: m.NotBefore.UTC(),
		ConcurrencyKey: m.ConcurrencyKey, RateLimitKey: m.RateLimitKey, TraceParent: m.TraceParent, Group: m.Group,
		After: h.After, AfterGroups: h.AfterGroups, Require: h.Require, Created: h.Created.UTC()})
}

func decodeHeld(data []byte) (*driver.HeldMessage, error) {
	var d heldDoc
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	if d.Version != 1 || d.ID == "" {
		return nil, fmt.Errorf("not a jobq held task (version %d)", d.Version)
	}
	return &driver.HeldMessage{
		Message: driver.Message{ID: d.ID, Body: d.Body, Priority: d.Priority, NotBefore: d.NotBefore,
			ConcurrencyKey: d.ConcurrencyKey, RateLimitKey: d.RateLimitKey, TraceParent: d.TraceParent, Group: d.Group},
		After: d.After, AfterGroups: d.AfterGroups, Require: d.Require, Created: d.Created,
	}, nil
}

// heldCache keeps decoded held messages by blob name and creation time,
// so that a sweep lists the held blobs without reading each again.
type heldCache struct {
	mu         sync.Mutex
	m          map[string]heldEntry
	emptyUntil time.Time // ListHeld found none; list again after this
}

// idle reports whether a listing from the start may be skipped: the last
// found no held task, less than heldIdleRecheck ago.
func (c *heldCache) idle(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return now.Before(c.emptyUntil)
}

// setIdle records a listing that found no held task (empty), or that
// this store held some (until is zero).
func (c *heldCache) setIdle(until time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.emptyUntil = until
}

type heldEntry struct {
	created time.Time
	msg     *driver.HeldMessage
}

func (c *heldCache) get(name string, created time.Time) *driver.HeldMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[name]; ok && e.created.Equal(created) {
		return e.msg
	}
	return nil
}

func (c *heldCache) put(name string, created time.Time, h *driver.HeldMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= heldCacheMax {
		c.m = map[string]heldEntry{}
	}
	c.m[name] = heldEntry{created, h}
}

func (c *heldCache) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
}

// clone is a copy of h that the caller may change.
func clone(h *driver.HeldMessage) *driver.HeldMessage {
	c := *h
	return &c
}

// checkHeldIDs refuses a batch with an ID too long to name a held blob.
func checkHeldIDs(msgs []*driver.HeldMessage) error {
	for _, h := range msgs {
		if h == nil {
			return driver.Errorf(errcode.InvalidArgument, "hold: a held message is nil")
		}
		if len(h.Message.ID) > MaxHeldIDLen {
			return driver.Errorf(errcode.InvalidArgument,
				"hold: task ID %.40q... is %d bytes; a task with dependencies on Azure has an ID of at most %d bytes (its blob's name): use a shorter ID",
				h.Message.ID, len(h.Message.ID), MaxHeldIDLen)
		}
	}
	return nil
}

// Hold implements driver.HeldStore: the batch's grouped tasks are
// recorded as their groups' members, then each message is a blob created
// only if none of its ID is held (else Duplicate). A task queued with the
// ID is not seen.
func (s *Store) Hold(ctx context.Context, msgs []*driver.HeldMessage) ([]driver.PushResult, error) {
	if err := checkHeldIDs(msgs); err != nil {
		return nil, err
	}
	out := make([]driver.PushResult, len(msgs))
	first := make(map[string]bool, len(msgs))
	var todo []int
	groups := map[string][]string{}
	var order []string
	for i, h := range msgs {
		id := h.Message.ID
		if first[id] {
			out[i].Duplicate = true
			continue
		}
		first[id] = true
		todo = append(todo, i)
		if g := h.Message.Group; g != "" {
			if _, ok := groups[g]; !ok {
				order = append(order, g)
			}
			groups[g] = append(groups[g], id)
		}
	}
	expires := time.Now().Add(driver.DefaultRetention)
	for _, g := range order {
		if err := s.AddGroupMembers(ctx, g, groups[g], expires); err != nil {
			return nil, err
		}
	}
	s.held.setIdle(time.Time{})
	err := each(ctx, len(todo), func(ctx context.Context, k int) error {
		h := msgs[todo[k]]
		data, err := encodeHeld(h)
		if err != nil {
			return s.errorf(err, "encode held task %q", h.Message.ID)
		}
		dup, err := s.createBlob(ctx, heldName(h.Message.ID), data)
		if err != nil {
			return s.errorf(err, "hold task %q", h.Message.ID)
		}
		out[todo[k]].Duplicate = dup
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// createBlob uploads data as blob name only if there is none (If-None-
// Match: *), creating the container when it is missing; existed reports
// a blob there already.
func (s *Store) createBlob(ctx context.Context, name string, data []byte) (existed bool, err error) {
	cond := &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}
	for attempt := 0; ; attempt++ {
		err := s.upload(ctx, name, "application/json", data, nil, cond)
		switch {
		case err == nil:
			return false, nil
		case bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet):
			return true, nil
		case attempt == 0 && bloberror.HasCode(err, bloberror.ContainerNotFound):
			if err := s.create(ctx); err != nil {
				return false, err
			}
		default:
			return false, err
		}
	}
}

// heldRead is a held blob as read: its message, ETag and claim.
type heldRead struct {
	msg     *driver.HeldMessage
	etag    *azcore.ETag
	claimed time.Time // zero: not claimed
}

// readHeld reads held task id's blob; nil when there is none (or it is
// not a held task's).
func (s *Store) readHeld(ctx context.Context, id string) (*heldRead, error) {
	resp, err := s.client.NewBlobClient(heldName(id)).DownloadStream(ctx, nil)
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound, bloberror.ContainerNotFound):
		return nil, nil
	case err != nil:
		return nil, s.errorf(err, "read held task %q", id)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, s.errorf(err, "read held task %q", id)
	}
	h, err := decodeHeld(buf.Bytes())
	if err != nil || h.Message.ID != id {
		return nil, nil
	}
	return &heldRead{msg: h, etag: resp.ETag, claimed: claimTime(resp.Metadata)}, nil
}

// claimTime is when the claim in a held blob's metadata was made; zero
// when there is none.
func claimTime(meta map[string]*string) time.Time {
	for k, v := range meta {
		if v == nil || !strings.EqualFold(k, heldClaim) {
			continue
		}
		_, ms, _ := strings.Cut(*v, " ")
		n, err := strconv.ParseInt(ms, 10, 64)
		if err != nil {
			return time.Unix(0, 0) // unreadable: as old as can be
		}
		return time.UnixMilli(n)
	}
	return time.Time{}
}

// standing reports whether a claim made at t still stands at now.
func standing(t, now time.Time) bool { return !t.IsZero() && now.Sub(t) < heldClaimGrace }

// readAll reads the held blobs of ids in parallel; out[i] nil where none.
func (s *Store) readAll(ctx context.Context, ids []string) ([]*heldRead, error) {
	out := make([]*heldRead, len(ids))
	err := each(ctx, len(ids), func(ctx context.Context, i int) error {
		r, err := s.readHeld(ctx, ids[i])
		out[i] = r
		return err
	})
	return out, err
}

// HeldOf implements driver.HeldStore: one read per ID.
func (s *Store) HeldOf(ctx context.Context, ids []string) ([]*driver.HeldMessage, error) {
	reads, err := s.readAll(ctx, ids)
	if err != nil {
		return nil, err
	}
	var out []*driver.HeldMessage
	for _, r := range reads {
		if r != nil {
			out = append(out, r.msg)
		}
	}
	return out, nil
}

// ListHeld implements driver.HeldStore: one listing of up to limit held
// blobs (the cursor is the listing's marker), each read once and then
// kept decoded while its blob is the same. After a listing that found
// none, none for heldIdleRecheck without a request, unless this store
// holds one: another process's held task is seen up to that much later.
func (s *Store) ListHeld(ctx context.Context, cursor string, limit int) ([]*driver.HeldMessage, string, error) {
	now := time.Now()
	if cursor == "" && s.held.idle(now) {
		return nil, "", nil
	}
	limit = min(max(limit, 1), 5000)
	opts := &container.ListBlobsFlatOptions{Prefix: to.Ptr(heldPrefix), MaxResults: to.Ptr(int32(limit))}
	if cursor != "" {
		opts.Marker = &cursor
	}
	resp, err := s.client.NewListBlobsFlatPager(opts).NextPage(ctx)
	switch {
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		s.held.setIdle(now.Add(heldIdleRecheck))
		return nil, "", nil
	case err != nil:
		return nil, "", s.errorf(err, "list held tasks")
	}
	if cursor == "" && len(resp.Segment.BlobItems) == 0 && (resp.NextMarker == nil || *resp.NextMarker == "") {
		s.held.setIdle(now.Add(heldIdleRecheck))
	}
	items := resp.Segment.BlobItems
	got := make([]*driver.HeldMessage, len(items))
	err = each(ctx, len(items), func(ctx context.Context, i int) error {
		h, err := s.listed(ctx, items[i])
		got[i] = h
		return err
	})
	if err != nil {
		return nil, "", err
	}
	page := make([]*driver.HeldMessage, 0, len(got))
	for _, h := range got {
		if h != nil {
			page = append(page, h)
		}
	}
	next := ""
	if resp.NextMarker != nil {
		next = *resp.NextMarker
	}
	return page, next, nil
}

// listed is the held message of listed blob b, from the cache when the
// blob is the one cached, else read (and cached); nil when it is not a
// held task's blob, or is gone since the listing (released or dropped).
func (s *Store) listed(ctx context.Context, b *container.BlobItem) (*driver.HeldMessage, error) {
	if b.Name == nil || b.Properties == nil || b.Properties.CreationTime == nil {
		return nil, nil
	}
	name, created := *b.Name, *b.Properties.CreationTime
	if h := s.held.get(name, created); h != nil {
		return clone(h), nil
	}
	raw, err := hex.DecodeString(strings.TrimPrefix(name, heldPrefix))
	if err != nil {
		return nil, nil
	}
	r, err := s.readHeld(ctx, string(raw))
	if err != nil || r == nil {
		return nil, err
	}
	s.held.put(name, created, r.msg)
	return clone(r.msg), nil
}

// Release implements driver.HeldStore: it claims each held blob (one
// conditional metadata write; an ID claimed by another sweeper within
// heldClaimGrace, or gone, is left out), pushes the claimed messages with
// push in one call (their group cleared: counted at Hold), and deletes
// their blobs. A message whose push failed is unclaimed again; the error
// is returned with the IDs pushed before it.
func (s *Store) Release(ctx context.Context, ids []string, push func(context.Context, []*driver.Message) ([]driver.PushResult, error)) ([]string, error) {
	claims := make([]*heldRead, len(ids))
	err := each(ctx, len(ids), func(ctx context.Context, i int) error {
		r, err := s.claim(ctx, ids[i])
		claims[i] = r
		return err
	})
	var won []*heldRead
	for _, c := range claims {
		if c != nil {
			won = append(won, c)
		}
	}
	if err != nil {
		s.unclaim(ctx, won)
		return nil, err
	}
	if len(won) == 0 {
		return nil, nil
	}
	msgs := make([]*driver.Message, len(won))
	for i, c := range won {
		m := c.msg.Message
		m.Group = ""
		msgs[i] = &m
	}
	res, perr := push(ctx, msgs)
	n := min(len(res), len(won))
	if perr == nil && n < len(won) {
		perr = driver.Errorf(errcode.Internal, "release: the push returned %d results for %d messages", len(res), len(won))
	}
	s.unclaim(ctx, won[n:])
	released := make([]string, n)
	err = each(ctx, n, func(ctx context.Context, i int) error {
		released[i] = won[i].msg.Message.ID
		_, err := s.deleteHeld(ctx, won[i].msg.Message.ID, won[i].etag)
		return err
	})
	if perr != nil {
		return released, perr
	}
	return released, err
}

// claim marks held task id's blob as being released by this store, if no
// standing claim is on it; nil when it is gone or another claim stands
// (or won meanwhile). The returned read's etag is the claim's.
func (s *Store) claim(ctx context.Context, id string) (*heldRead, error) {
	r, err := s.readHeld(ctx, id)
	if err != nil || r == nil {
		return nil, err
	}
	now := time.Now()
	if standing(r.claimed, now) {
		return nil, nil
	}
	meta := map[string]*string{heldClaim: to.Ptr(s.owner + " " + strconv.FormatInt(now.UnixMilli(), 10))}
	resp, err := s.client.NewBlobClient(heldName(id)).SetMetadata(ctx, meta, &blob.SetMetadataOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: r.etag}},
	})
	switch {
	case bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobNotFound):
		return nil, nil // another sweeper claimed, released or dropped it
	case err != nil:
		return nil, s.errorf(err, "claim held task %q for its release", id)
	}
	r.etag = resp.ETag
	return r, nil
}

// unclaim lifts this store's claims on reads (best effort: a claim left
// on lapses after heldClaimGrace).
func (s *Store) unclaim(ctx context.Context, reads []*heldRead) {
	_ = each(ctx, len(reads), func(ctx context.Context, i int) error {
		_, _ = s.client.NewBlobClient(heldName(reads[i].msg.Message.ID)).SetMetadata(ctx, map[string]*string{}, &blob.SetMetadataOptions{
			AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: reads[i].etag}},
		})
		return nil
	})
}

// deleteHeld deletes held task id's blob if it is still at etag;
// removed reports that this call deleted it.
func (s *Store) deleteHeld(ctx context.Context, id string, etag *azcore.ETag) (removed bool, err error) {
	name := heldName(id)
	_, err = s.client.NewBlobClient(name).Delete(ctx, &blob.DeleteOptions{
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{IfMatch: etag}},
	})
	s.held.forget(name)
	switch {
	case err == nil:
		return true, nil
	case bloberror.HasCode(err, bloberror.ConditionNotMet, bloberror.BlobNotFound):
		return false, nil
	default:
		return false, s.errorf(err, "delete held task %q", id)
	}
}

// Drop implements driver.HeldStore: each held blob that no standing
// claim is on is deleted If-Match what was read; a dropped task with a
// group gets a cancelled record unless it has one (the portable layer
// writes it first), so that its group's counts end.
func (s *Store) Drop(ctx context.Context, ids []string) ([]string, error) {
	dropped := make([]string, len(ids))
	now := time.Now()
	err := each(ctx, len(ids), func(ctx context.Context, i int) error {
		r, err := s.readHeld(ctx, ids[i])
		if err != nil || r == nil || standing(r.claimed, now) {
			return err
		}
		ok, err := s.deleteHeld(ctx, ids[i], r.etag)
		if err != nil || !ok {
			return err
		}
		dropped[i] = ids[i]
		if r.msg.Message.Group == "" {
			return nil
		}
		return s.recordDropped(ctx, ids[i], now)
	})
	out := make([]string, 0, len(ids))
	for _, id := range dropped {
		if id != "" {
			out = append(out, id)
		}
	}
	return out, err
}

// recordDropped writes a bare cancelled record of dropped task id where
// it has none.
func (s *Store) recordDropped(ctx context.Context, id string, now time.Time) error {
	data, meta, err := encode(&driver.ResultRecord{ID: id, State: driver.ResultCancelled, UpdatedAt: now, ExpiresAt: now.Add(driver.DefaultRetention)})
	if err != nil {
		return s.errorf(err, "encode the record of task %q", id)
	}
	cond := &blob.ModifiedAccessConditions{IfNoneMatch: to.Ptr(azcore.ETagAny)}
	err = s.upload(ctx, blobName(id), "application/json", data, meta, cond)
	if err != nil && !bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet) {
		return s.errorf(err, "record dropped task %q as cancelled", id)
	}
	return nil
}

// newOwner names this store in its claims.
func newOwner() string { return strings.ToLower(rand.Text()[:12]) }

// DependenciesFallback is the Dependencies declaration's text on the
// Azure backends with a record container.
const DependenciesFallback = "held tasks (after, after-group, a group's then step) are blobs under held/ in the result container, decided by the workers' sweep every 2 s: " +
	"a task already queued or running with the same ID is not seen (only one already held is a duplicate), and an after ID with no record and no held task is taken as queued, not refused; " +
	"a release claims the blob, pushes the message, then deletes the blob, so a sweeper that dies between its push and the delete makes the task run twice " +
	"after 30 s (at least once, never lost: Storage Queue has no dedup; Service Bus drops the second copy when the queue has duplicate detection on); " +
	"a held task counts in its group from Hold, and a group's end is read from the records (eventually consistent); " +
	"a worker whose sweep found nothing held lists again after 30 s, so another process's held task may wait that much longer"

// Hold implements driver.HeldStore for the backend's store.
func (r *Records) Hold(ctx context.Context, msgs []*driver.HeldMessage) ([]driver.PushResult, error) {
	s, err := r.get("hold tasks")
	if err != nil {
		return nil, err
	}
	return s.Hold(ctx, msgs)
}

// ListHeld implements driver.HeldStore for the backend's store.
func (r *Records) ListHeld(ctx context.Context, cursor string, limit int) ([]*driver.HeldMessage, string, error) {
	s, err := r.get("list held tasks")
	if err != nil {
		return nil, "", err
	}
	return s.ListHeld(ctx, cursor, limit)
}

// Release is driver.HeldStore's Release for the backend's store, pushing
// with push (the driver's Push).
func (r *Records) Release(ctx context.Context, ids []string, push func(context.Context, []*driver.Message) ([]driver.PushResult, error)) ([]string, error) {
	s, err := r.get("release held tasks")
	if err != nil {
		return nil, err
	}
	return s.Release(ctx, ids, push)
}

// Drop implements driver.HeldStore for the backend's store.
func (r *Records) Drop(ctx context.Context, ids []string) ([]string, error) {
	s, err := r.get("drop held tasks")
	if err != nil {
		return nil, err
	}
	return s.Drop(ctx, ids)
}

// HeldOf implements driver.HeldStore for the backend's store.
func (r *Records) HeldOf(ctx context.Context, ids []string) ([]*driver.HeldMessage, error) {
	s, err := r.get("read held tasks")
	if err != nil {
		return nil, err
	}
	return s.HeldOf(ctx, ids)
}
