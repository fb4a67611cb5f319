package driver

import (
	"context"
	"time"
)

// Pager is implemented by drivers that can page through the whole of their
// queued messages and of their dead letters with a cursor, which the bulk
// actions by filter use (BulkActions Native). Each call is one short read:
// no lock or transaction outlives it, so messages may come and go between
// pages. A message present from the first page to the last, and not moved
// meanwhile, is returned at least once (exactly once where the engine's cursor is an
// order; Redis SCAN may repeat one while its set grows); one that arrives or moves during
// the scan may be returned or not.
type Pager interface {
	// PageQueued returns about max messages that are ready or delayed (not
	// in flight): at most max, unless the engine takes the count as a hint
	// (Redis SCAN), in the driver's cursor order, from the one after the
	// cursor after ("" starts at the beginning). next is the cursor of the
	// following page, "" when this page was the last. A page may hold
	// fewer than max messages, none even, without being the last.
	PageQueued(ctx context.Context, after string, max int) (msgs []*PeekedMessage, next string, err error)
	// PageDead does the same over the dead letters.
	PageDead(ctx context.Context, after string, max int) (msgs []*DeadMessage, next string, err error)
}

// DeadSincer is implemented by Pagers whose dead letters page in the order
// of a time they carry (when they were dead-lettered, or when they were
// enqueued where, as on Service Bus, a letter keeps its place in its
// queue's order) and that can find where the recent ones begin without
// reading those before. A wait reads the letters
// after that cursor, at the end, to see tasks dead-lettered while it goes on
// however many letters are older.
type DeadSincer interface {
	// DeadSince returns the PageDead cursor after which lie the dead
	// letters dead-lettered at or after since ("": from the first), read a
	// few letters at a time: about twice the base-2 logarithm of the span
	// of cursors. Letters whose times are out of order may fall on either
	// side.
	DeadSince(ctx context.Context, since time.Time) (string, error)
}

// BulkWindow is the most queued messages or dead letters one pass of a bulk
// action sees on a driver without a Pager (BulkActions Emulated): Peek and
// ListDead are asked for this many, or for MaxPeek when that is smaller
// (a backend that cannot page usually peeks few messages at once).
const BulkWindow = 1000
