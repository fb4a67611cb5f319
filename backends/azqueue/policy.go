package azqueue

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
)

// Queue policies (docs/policies.md) live in the main queue's metadata, under
// one key holding all of them (driver.EncodePolicies), so that every worker
// reads the same ones. Storage Queue cannot refuse a dequeue per key, so
// concurrency and rate policies are declared Emulated: each worker enforces
// them for its own process. Max-depth is refused: the approximate count and
// a separate push cannot make an atomic bound.
//
// Setting a policy reads and rewrites the queue's metadata; two policy
// changes at the same moment may lose one of them (the service has no
// conditional metadata write). Other metadata keys are kept.

// policyMetadataKey is the metadata name (lower case, as the service returns
// names) that holds the encoded policies.
const policyMetadataKey = "jobqpolicies"

var _ driver.PolicyStore = (*Driver)(nil)

// readPolicies returns the queue's metadata and its decoded policies.
func (q *Driver) readPolicies(ctx context.Context) (map[string]*string, []driver.Policy, error) {
	if err := q.closing.Err(); err != nil {
		return nil, nil, err
	}
	p, err := q.main.GetProperties(ctx, nil)
	if err != nil {
		return nil, nil, wrap(err, "read the policies of %s", q.name)
	}
	var pols []driver.Policy
	for k, v := range p.Metadata {
		if strings.EqualFold(k, policyMetadataKey) && v != nil {
			if pols, err = driver.DecodePolicies(*v); err != nil {
				return nil, nil, err
			}
		}
	}
	return p.Metadata, pols, nil
}

// writePolicies stores pols, keeping the queue's other metadata.
func (q *Driver) writePolicies(ctx context.Context, meta map[string]*string, pols []driver.Policy) error {
	out := make(map[string]*string, len(meta)+1)
	for k, v := range meta {
		if !strings.EqualFold(k, policyMetadataKey) {
			out[k] = v
		}
	}
	if len(pols) > 0 {
		enc := driver.EncodePolicies(pols)
		out[policyMetadataKey] = &enc
	}
	if _, err := q.main.SetMetadata(ctx, &azqueue.SetMetadataOptions{Metadata: out}); err != nil {
		return wrap(err, "store the policies of %s", q.name)
	}
	return nil
}

// SetPolicy implements driver.PolicyStore.
func (q *Driver) SetPolicy(ctx context.Context, p driver.Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if !utf8.ValidString(p.Key) {
		// The stored form is JSON text, which would turn the invalid bytes
		// into U+FFFD: the policy would then govern another key.
		return driver.Errorf(errcode.InvalidArgument,
			"policy key %q is not valid UTF-8: Azure Storage Queue keeps policies as text in the queue's metadata, which cannot hold it unchanged; use a UTF-8 key (the same one the tasks carry)", p.Key)
	}
	if p.Kind == driver.MaxDepthPolicy {
		return driver.Errorf(errcode.Unimplemented, "azqueue: Storage Queue cannot bound its depth: its message count is approximate and a push cannot be made conditional on it; use a backend with max-depth (sqlite, postgres, redis), or limit producers yourself")
	}
	meta, pols, err := q.readPolicies(ctx)
	if err != nil {
		return err
	}
	pols, _ = driver.ReplacePolicy(pols, p, false)
	if err := q.checkRoom(meta, pols, p); err != nil {
		return err
	}
	return q.writePolicies(ctx, meta, pols)
}

// maxMetadataBytes is the most metadata Azure keeps on a queue: 8 KiB of
// names and values together. Azurite keeps more, so the driver checks.
const maxMetadataBytes = 8 * 1024

// checkRoom refuses setting p when the queue's metadata with pols would
// exceed Azure's 8 KiB, which the service would refuse (400
// MetadataTooLarge). A new schedule must leave room for its firing and
// paused states, written later by every scheduler: without it, the
// schedule would be stored but could never fire. Any policy but a pause
// leaves room for a pause of the whole queue, so that stopping the
// workers never fails for want of room.
func (q *Driver) checkRoom(meta map[string]*string, pols []driver.Policy, p driver.Policy) error {
	// Timestamps as long as any a scheduler writes before 2262.
	late := time.Date(2261, 12, 31, 23, 59, 59, 999e6, time.UTC)
	need := append([]driver.Policy{}, pols...)
	if p.Kind != driver.PausePolicy {
		need = append(need, driver.PauseState{By: strings.Repeat("x", 100), Since: late}.Policy())
	}
	if s, err := driver.ParseScheduleSpec(p); err == nil {
		need = append(need,
			driver.FiredState{Name: s.Name, Slot: late, Pushed: true, ClaimedAt: late}.Policy(),
			driver.SchedulePaused(s.Name, late))
	}
	n := len(policyMetadataKey) + len(driver.EncodePolicies(need))
	for k, v := range meta {
		if !strings.EqualFold(k, policyMetadataKey) && v != nil {
			n += len(k) + len(*v)
		}
	}
	if n <= maxMetadataBytes {
		return nil
	}
	return driver.Errorf(errcode.ResourceExhausted,
		"%s would take %d bytes of %s's metadata, where Azure Storage Queue keeps policies and schedules, over its limit of %d bytes: remove schedules or policies you no longer need (jobq QUEUE schedule rm NAME, jobq QUEUE policy unset ...), or schedule a script instead of a long command",
		describePolicy(p), n, q.name, maxMetadataBytes)
}

// describePolicy names p in an error.
func describePolicy(p driver.Policy) string {
	if s, err := driver.ParseScheduleSpec(p); err == nil {
		return fmt.Sprintf("schedule %q", s.Name)
	}
	if p.Key != "" {
		return fmt.Sprintf("the %s policy of %q", p.Kind, p.Key)
	}
	return fmt.Sprintf("the %s policy", p.Kind)
}

// UnsetPolicy implements driver.PolicyStore.
func (q *Driver) UnsetPolicy(ctx context.Context, kind driver.PolicyKind, key string) (bool, error) {
	meta, pols, err := q.readPolicies(ctx)
	if err != nil {
		return false, err
	}
	pols, had := driver.ReplacePolicy(pols, driver.Policy{Kind: kind, Key: key}, true)
	if !had {
		return false, nil
	}
	return true, q.writePolicies(ctx, meta, pols)
}

// ListPolicies implements driver.PolicyStore.
func (q *Driver) ListPolicies(ctx context.Context) ([]driver.Policy, error) {
	_, pols, err := q.readPolicies(ctx)
	return pols, err
}

// KeyStats implements driver.PolicyStore. Storage Queue cannot count
// messages per key, so only the policies' keys are listed, with unknown
// counts (Waiting -1; in-flight counts live in each worker).
func (q *Driver) KeyStats(ctx context.Context) ([]driver.KeyStat, error) {
	_, pols, err := q.readPolicies(ctx)
	if err != nil {
		return nil, err
	}
	return driver.UncountedKeyStats(pols), nil
}

// pauseFallback says how late Storage Queue workers see a pause.
const pauseFallback = "pauses are kept in the queue's metadata with the other policies, written by read-modify-write: every worker stops (or starts again) within about 2s, as each rereads the metadata every 2s; a receive already under way may take one more task, which the worker puts back unrun; two admins changing policies at the same moment can lose one change"
