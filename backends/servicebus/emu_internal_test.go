package servicebus

import (
	"context"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus"
	"github.com/Azure/azure-sdk-for-go/sdk/messaging/azservicebus/admin"

	emu "github.com/jobq/jobq/emulators/servicebus"
)

// startEmulator starts an emulator of the test's own (locks of 5 s) and
// returns a client of it and its administration client; the client is
// closed when the test ends.
func startEmulator(t *testing.T) (*azservicebus.Client, *admin.Client) {
	t.Helper()
	e := emu.Start(t, emu.Options{LockDuration: 5 * time.Second})
	client, err := azservicebus.NewClientFromConnectionString(e.ConnectionString(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close(context.Background()) })
	adm, err := admin.NewClientFromConnectionString(e.ConnectionString(), &admin.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: e.AdminTransport()}})
	if err != nil {
		t.Fatal(err)
	}
	return client, adm
}

// openDriver opens queue on client, without administration, closed when
// the test ends.
func openDriver(t *testing.T, client *azservicebus.Client, queue string) *Driver {
	t.Helper()
	d, err := New(context.Background(), client, nil, Options{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}
