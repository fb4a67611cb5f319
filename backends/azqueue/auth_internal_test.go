package azqueue

import (
	"fmt"
	"log/slog"
	"testing"
)

// TestDefaultCredentialChoice: a client ID alone names a user-assigned
// managed identity; with a secret it is a service principal, which
// DefaultAzureCredential handles. (Not parallel: it sets the environment.)
func TestDefaultCredentialChoice(t *testing.T) {
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "*azidentity.DefaultAzureCredential"},
		{map[string]string{"DEFAULT_IDENTITY_CLIENT_ID": "11111111-1111-1111-1111-111111111111"}, "*azidentity.ManagedIdentityCredential"},
		{map[string]string{"AZURE_CLIENT_ID": "11111111-1111-1111-1111-111111111111"}, "*azidentity.ManagedIdentityCredential"},
		{map[string]string{"AZURE_CLIENT_ID": "11111111-1111-1111-1111-111111111111", "AZURE_CLIENT_SECRET": "s", "AZURE_TENANT_ID": "t"}, "*azidentity.DefaultAzureCredential"},
	}
	for _, c := range cases {
		for _, k := range []string{"DEFAULT_IDENTITY_CLIENT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_TENANT_ID"} {
			t.Setenv(k, c.env[k])
		}
		cred, err := defaultCredential(slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if got := fmt.Sprintf("%T", cred); got != c.want {
			t.Errorf("with %v: credential %s, want %s", c.env, got, c.want)
		}
	}
}
