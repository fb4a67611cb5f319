package azblob

import (
	"testing"
)

// TestConnectionAccount: which account a connection string serves decides
// whether the store uses it for a URL.
func TestConnectionAccount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ cs, want string }{
		{DevelopmentConnectionString, "devstoreaccount1"},
		{"DefaultEndpointsProtocol=https;AccountName=prod01;AccountKey=a2V5;EndpointSuffix=core.windows.net", "prod01"},
		{"accountname=lower;AccountKey=a2V5", "lower"},
		{"BlobEndpoint=https://sasacct.blob.core.windows.net/;SharedAccessSignature=sv=2020&sig=x", "sasacct"},
		{"BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;SharedAccessSignature=sv=2020&sig=x", "devstoreaccount1"},
		{"QueueEndpoint=https://q.queue.core.windows.net/;SharedAccessSignature=sig=x", ""},
		{"", ""},
	} {
		if got := connectionAccount(tc.cs); got != tc.want {
			t.Errorf("connectionAccount(%.40q) = %q, want %q", tc.cs, got, tc.want)
		}
	}
}

// TestConnectionStringChoice: the first connection string for the URL's
// account wins; one for another account is passed over.
func TestConnectionStringChoice(t *testing.T) {
	t.Setenv(EnvConnectionString, "AccountName=queueacct;AccountKey=a2V5")
	t.Setenv(EnvAzureConnectionString, "UseDevelopmentStorage=true")
	o := &URLOpener{ConnectionString: "AccountName=mine;AccountKey=a2V5"}
	for _, tc := range []struct{ account, from string }{
		{"mine", "URLOpener.ConnectionString"},
		{"queueacct", "$" + EnvConnectionString},
		{"devstoreaccount1", "$" + EnvAzureConnectionString},
		{"nobody", ""},
	} {
		if _, from := o.connectionString(tc.account); from != tc.from {
			t.Errorf("account %s: connection string from %q, want %q", tc.account, from, tc.from)
		}
	}
}
