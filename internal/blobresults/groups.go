package blobresults

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq/driver"
)

// Groups on the Azure backends (driver.Groups Emulated) are built on the
// record container. A push with a group writes, before it sends the
// messages, a member blob groups/NAME/TIME-RANDOM listing their task IDs,
// one per line (NAME URL-escaped). A group's counts are read, not kept:
// its members, then each member's result record (one read per task). So
// they are eventually consistent: a task counts as pushed from just
// before its message is sent (a push that then fails leaves it counted,
// open for ever), and as ended once its record is written, just before
// its message is deleted; a task in several groups counts in each by its
// newest record; failed attempts are not counted, and the open tasks are
// not split. A member blob expires with the records (the retention), and
// PurgeResults deletes it then.
const groupPrefix = "groups/"

// groupDir is the prefix of group name's member blobs.
func groupDir(name string) string { return groupPrefix + url.PathEscape(name) + "/" }

// AddGroupMembers records ids as pushed in group name, kept until
// expires.
func (s *Store) AddGroupMembers(ctx context.Context, name string, ids []string, expires time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	blobName := groupDir(name) + strconv.FormatInt(time.Now().UnixNano(), 10) + "-" + strings.ToLower(rand.Text()[:8])
	data := []byte(strings.Join(ids, "\n") + "\n")
	meta := map[string]*string{metaExpires: to.Ptr(strconv.FormatInt(expires.UnixMilli(), 10))}
	return s.putBlob(ctx, blobName, "text/plain", data, meta, fmt.Sprintf("record the members of group %q", name))
}

// GroupCounts implements driver.GroupStore from the member blobs and the
// members' records; nil when the group has no members.
func (s *Store) GroupCounts(ctx context.Context, name string) (*driver.GroupCounters, error) {
	c := &driver.GroupCounters{Name: name}
	ids, err := s.groupMembers(ctx, name, c)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	c.Pushed = int64(len(ids))
	recs, err := s.GetResults(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if r == nil {
			continue
		}
		switch r.State {
		case driver.ResultSucceeded:
			c.Succeeded++
		case driver.ResultDeadLettered:
			c.DeadLettered++
		case driver.ResultCancelled:
			c.Cancelled++
		}
		if r.UpdatedAt.After(c.Updated) {
			c.Updated = r.UpdatedAt
		}
	}
	return c, nil
}

// groupMembers returns the task IDs of group name, each once, and sets
// c's Created and Updated from its member blobs.
func (s *Store) groupMembers(ctx context.Context, name string, c *driver.GroupCounters) ([]string, error) {
	seen := map[string]bool{}
	var ids []string
	prefix := groupDir(name)
	now := time.Now()
	found, err := s.eachBlob(ctx, &container.ListBlobsFlatOptions{Prefix: &prefix}, fmt.Sprintf("list the members of group %q", name), func(b *container.BlobItem) error {
		if b.Properties == nil || expired(b.Metadata, now) {
			return nil
		}
		stretch(c, b.Properties.LastModified)
		data, err := s.readBlob(ctx, *b.Name)
		if err != nil {
			return err
		}
		for _, id := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if id != "" && !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		return nil
	})
	if !found {
		return nil, err
	}
	return ids, nil
}

// stretch widens c's Created..Updated to include t (nil: unknown).
func stretch(c *driver.GroupCounters, t *time.Time) {
	if t == nil {
		return
	}
	if c.Created.IsZero() || t.Before(c.Created) {
		c.Created = *t
	}
	if t.After(c.Updated) {
		c.Updated = *t
	}
}

// ListGroups implements driver.GroupStore: the groups with member blobs,
// most recently pushed to first (listing every member blob's name).
func (s *Store) ListGroups(ctx context.Context, limit int) ([]*driver.GroupCounters, error) {
	last := map[string]time.Time{}
	prefix := groupPrefix
	found, err := s.eachBlob(ctx, &container.ListBlobsFlatOptions{Prefix: &prefix}, "list groups", func(b *container.BlobItem) error {
		if b.Properties == nil || b.Properties.LastModified == nil {
			return nil
		}
		esc, _, ok := strings.Cut(strings.TrimPrefix(*b.Name, groupPrefix), "/")
		name, err := url.PathUnescape(esc)
		if !ok || err != nil {
			return nil
		}
		if t := *b.Properties.LastModified; t.After(last[name]) {
			last[name] = t
		}
		return nil
	})
	if !found {
		return nil, err
	}
	names := make([]string, 0, len(last))
	for n := range last {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if !last[names[i]].Equal(last[names[j]]) {
			return last[names[i]].After(last[names[j]])
		}
		return names[i] < names[j]
	})
	if len(names) > limit {
		names = names[:limit]
	}
	out := make([]*driver.GroupCounters, 0, len(names))
	for _, n := range names {
		c, err := s.GroupCounts(ctx, n)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, c)
		}
	}
	return out, nil
}

// readBlob downloads blob name.
func (s *Store) readBlob(ctx context.Context, name string) ([]byte, error) {
	resp, err := s.client.NewBlobClient(name).DownloadStream(ctx, nil)
	if err != nil {
		return nil, s.errorf(err, "read %s", name)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, s.errorf(err, "read %s", name)
	}
	return buf.Bytes(), nil
}

// AddGroupMembers records ids as pushed in group name (see Store).
func (r *Records) AddGroupMembers(ctx context.Context, name string, ids []string, expires time.Time) error {
	s, err := r.get("push to group " + name)
	if err != nil {
		return err
	}
	return s.AddGroupMembers(ctx, name, ids, expires)
}

// GroupMembers implements driver.GroupMemberLister for the backend's
// store.
func (r *Records) GroupMembers(ctx context.Context, name string) ([]string, error) {
	s, err := r.get("group")
	if err != nil {
		return nil, err
	}
	return s.groupMembers(ctx, name, &driver.GroupCounters{})
}

// GroupCounts implements driver.GroupStore for the backend's store.
func (r *Records) GroupCounts(ctx context.Context, name string) (*driver.GroupCounters, error) {
	s, err := r.get("group")
	if err != nil {
		return nil, err
	}
	return s.GroupCounts(ctx, name)
}

// ListGroups implements driver.GroupStore for the backend's store.
func (r *Records) ListGroups(ctx context.Context, limit int) ([]*driver.GroupCounters, error) {
	s, err := r.get("groups")
	if err != nil {
		return nil, err
	}
	return s.ListGroups(ctx, limit)
}

// GroupsFallback is the Groups declaration's text on the Azure backends.
const GroupsFallback = "group counts are read from the result records (one read per task, so `group` takes seconds for thousands of tasks): " +
	"eventually consistent (a task counts as ended once its record is written, as pushed just before its message is sent), " +
	"failed attempts are not counted, queued, delayed and running are shown together as open, and a received task's Group is empty"

// AddPushGroups records the grouped messages of a push as their groups'
// members, before the push sends them (see Store); a push without groups
// costs nothing.
func (r *Records) AddPushGroups(ctx context.Context, msgs []*driver.Message) error {
	var byGroup map[string][]string
	var order []string
	for _, m := range msgs {
		if m.Group == "" {
			continue
		}
		if byGroup == nil {
			byGroup = map[string][]string{}
		}
		if _, ok := byGroup[m.Group]; !ok {
			order = append(order, m.Group)
		}
		byGroup[m.Group] = append(byGroup[m.Group], m.ID)
	}
	expires := time.Now().Add(driver.DefaultRetention)
	for _, g := range order {
		if err := r.AddGroupMembers(ctx, g, byGroup[g], expires); err != nil {
			return err
		}
	}
	return nil
}
