package servicebus

import (
	"context"

	"github.com/jobq/jobq/driver"
)

// Held tasks (dependencies and group steps, driver.HeldStore) are blobs
// of the result container: see blobresults (held.go) for how a release
// claims, pushes and deletes, and what that guarantees.
var _ driver.HeldStore = (*Driver)(nil)

// Hold implements driver.HeldStore. A task whose ID Service Bus would
// refuse as a MessageId is refused here, not at its release.
func (d *Driver) Hold(ctx context.Context, msgs []*driver.HeldMessage) ([]driver.PushResult, error) {
	for _, h := range msgs {
		if h != nil {
			if err := checkMessageID(h.Message.ID); err != nil {
				return nil, err
			}
		}
	}
	return d.rec.Hold(ctx, msgs)
}

// ListHeld implements driver.HeldStore.
func (d *Driver) ListHeld(ctx context.Context, cursor string, limit int) ([]*driver.HeldMessage, string, error) {
	return d.rec.ListHeld(ctx, cursor, limit)
}

// Release implements driver.HeldStore: each claimed message goes out
// through Push.
func (d *Driver) Release(ctx context.Context, ids []string) ([]string, error) {
	return d.rec.Release(ctx, ids, d.Push)
}

// Drop implements driver.HeldStore.
func (d *Driver) Drop(ctx context.Context, ids []string) ([]string, error) {
	return d.rec.Drop(ctx, ids)
}

// HeldOf implements driver.HeldStore.
func (d *Driver) HeldOf(ctx context.Context, ids []string) ([]*driver.HeldMessage, error) {
	return d.rec.HeldOf(ctx, ids)
}
