package servicebus

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Queue policies (docs/policies.md) live in the queue's user metadata
// (admin API), prefixed so that jobq never overwrites metadata it did not
// write. Service Bus cannot refuse a receive per key, so concurrency and
// rate policies are declared Emulated: each worker enforces them for its
// own process. Max-depth is refused: Service Bus's only bound is the queue's
// size in megabytes. Reading and writing policies needs Manage rights;
// two policy changes at the same moment may lose one (read, modify, write).

// policyPrefix marks user metadata that holds jobq's policies.
const policyPrefix = "jobq-policies:"

var _ driver.PolicyStore = (*Driver)(nil)

func (d *Driver) adminOrFail(op string) error {
	if err := d.closing.Err(); err != nil {
		return err
	}
	if d.admin == nil {
		return driver.Errorf(errcode.Unimplemented, "servicebus %s: queue policies are kept in the queue's user metadata, which needs the admin endpoint; this connection has none", op)
	}
	return nil
}

// readPolicies returns the decoded policies from the queue's user metadata.
func (d *Driver) readPolicies(ctx context.Context, op string) ([]driver.Policy, error) {
	if err := d.adminOrFail(op); err != nil {
		return nil, err
	}
	got, err := d.admin.GetQueue(ctx, d.queue, nil)
	if err != nil {
		return nil, d.fail(op, err)
	}
	if got == nil {
		return nil, driver.Errorf(errcode.NotFound, "servicebus %s: queue %q does not exist", op, d.queue)
	}
	meta := ""
	if got.UserMetadata != nil {
		meta = *got.UserMetadata
	}
	if meta == "" {
		return nil, nil
	}
	enc, ok := strings.CutPrefix(meta, policyPrefix)
	if !ok {
		return nil, driver.Errorf(errcode.FailedPrecondition, "servicebus %s: the queue's user metadata holds something else (%q), so jobq cannot keep its policies there; clear it to use policies", op, truncate(meta, 40))
	}
	return driver.DecodePolicies(enc)
}

// writePolicies stores pols in the queue's user metadata, keeping every
// other property of the queue.
func (d *Driver) writePolicies(ctx context.Context, op string, pols []driver.Policy) error {
	got, err := d.admin.GetQueue(ctx, d.queue, nil)
	if err != nil {
		return d.fail(op, err)
	}
	if got == nil {
		return driver.Errorf(errcode.NotFound, "servicebus %s: queue %q does not exist", op, d.queue)
	}
	props := got.QueueProperties
	meta := ""
	if len(pols) > 0 {
		meta = policyPrefix + driver.EncodePolicies(pols)
	}
	if len(meta) > 1024 {
		return driver.Errorf(errcode.ResourceExhausted, "servicebus %s: the policies need %d bytes of user metadata, more than Service Bus's 1024; remove some", op, len(meta))
	}
	props.UserMetadata = &meta
	if _, err := d.admin.UpdateQueue(ctx, d.queue, props, nil); err != nil {
		return d.fail(op, err)
	}
	return nil
}

// SetPolicy implements driver.PolicyStore.
func (d *Driver) SetPolicy(ctx context.Context, p driver.Policy) error {
	const op = "policy set"
	if err := p.Validate(); err != nil {
		return err
	}
	if !utf8.ValidString(p.Key) {
		// The stored form is JSON text, which would turn the invalid bytes
		// into U+FFFD: the policy would then govern another key.
		return driver.Errorf(errcode.InvalidArgument,
			"policy key %q is not valid UTF-8: Service Bus keeps policies as text in the queue's user metadata, which cannot hold it unchanged; use a UTF-8 key (the same one the tasks carry)", p.Key)
	}
	if p.Kind == driver.MaxDepthPolicy {
		return driver.Errorf(errcode.Unimplemented, "servicebus: Service Bus cannot bound a queue's depth in messages (only its size in megabytes, set on the queue); use a backend with max-depth (sqlite, postgres, redis)")
	}
	pols, err := d.readPolicies(ctx, op)
	if err != nil {
		return err
	}
	pols, _ = driver.ReplacePolicy(pols, p, false)
	return d.writePolicies(ctx, op, pols)
}

// UnsetPolicy implements driver.PolicyStore.
func (d *Driver) UnsetPolicy(ctx context.Context, kind driver.PolicyKind, key string) (bool, error) {
	const op = "policy unset"
	pols, err := d.readPolicies(ctx, op)
	if err != nil {
		return false, err
	}
	pols, had := driver.ReplacePolicy(pols, driver.Policy{Kind: kind, Key: key}, true)
	if !had {
		return false, nil
	}
	return true, d.writePolicies(ctx, op, pols)
}

// ListPolicies implements driver.PolicyStore.
func (d *Driver) ListPolicies(ctx context.Context) ([]driver.Policy, error) {
	return d.readPolicies(ctx, "policy list")
}

// KeyStats implements driver.PolicyStore: the policies' keys with unknown
// counts (Service Bus cannot count per key; in-flight counts live in each
// worker).
func (d *Driver) KeyStats(ctx context.Context) ([]driver.KeyStat, error) {
	pols, err := d.readPolicies(ctx, "stats")
	if err != nil {
		return nil, err
	}
	return driver.UncountedKeyStats(pols), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
