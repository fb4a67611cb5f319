package main_test

import (
	"context"
	"crypto/rand"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq/stash/azblob"
)

// TestStashOnAzureBlob: the CLI's --stash takes azblob:// URLs, and a
// worker without --stash reads the task from the reference alone, with the
// connection string users give Azure tools. Azurite's blob service on
// 127.0.0.1:10000 stands in for Azure.
func TestStashOnAzureBlob(t *testing.T) {
	t.Parallel()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:10000", time.Second); err == nil {
		_ = c.Close()
	} else if out, err := exec.Command("../../.ci/start-azurite.sh").CombinedOutput(); err != nil {
		t.Fatalf("this test needs Azurite's blob service: %v\n%s", err, out)
	}
	name := "jq-" + strings.ToLower(rand.Text()[:12])
	cont, err := container.NewClientFromConnectionString(azblob.DevelopmentConnectionString, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cont.Create(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cont.Delete(context.Background(), nil) })
	blobs := func() int {
		n := 0
		for pager := cont.NewListBlobsFlatPager(nil); pager.More(); {
			page, err := pager.NextPage(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			n += len(page.Segment.BlobItems)
		}
		return n
	}

	b := newBench(t)
	b.queue += "&max_message_bytes=65536" // as on Azure Storage Queue
	env := []string{azblob.EnvAzureConnectionString + "=UseDevelopmentStorage=true"}
	big := "echo large-task-ran # " + strings.Repeat("x", 1<<20)
	if r := b.runWith(big+"\n", env, "push", "--stash", "azblob://devstoreaccount1/"+name+"/large"); r.code != 0 {
		t.Fatalf("push with an azblob stash exited %d:\n%s", r.code, tail(r.stderr, 4000))
	}
	if n := blobs(); n != 1 {
		t.Fatalf("%d blobs after the push, want 1", n)
	}
	if r := b.runWith("", env, "worker"); r.code != 0 || !strings.Contains(r.stderr, "] large-task-ran") {
		t.Fatalf("worker exited %d; want the stashed task run:\n%s", r.code, tail(r.stderr, 4000))
	}
	if n := blobs(); n != 0 {
		t.Errorf("%d blobs remain after the task completed, want 0", n)
	}
}
