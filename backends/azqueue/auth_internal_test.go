package azqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// credentialEnv are the variables that steer azidentity; each test case
// sets all of them (empty when unused). Tests that set the environment are
// not parallel.
var credentialEnv = []string{
	"DEFAULT_IDENTITY_CLIENT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
	"AZURE_TENANT_ID", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_AUTHORITY_HOST", "AZURE_USERNAME", "AZURE_TOKEN_CREDENTIALS",
}

func setCredentialEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for _, k := range credentialEnv {
		t.Setenv(k, env[k])
		if env[k] == "" {
			os.Unsetenv(k) // azidentity tells unset from empty for some
		}
	}
}

// TestDefaultCredentialChoice: AZURE_CLIENT_ID never bypasses the
// DefaultAzureCredential chain (workload identity, managed identity and
// `az login` must all stay available); DEFAULT_IDENTITY_CLIENT_ID adds a
// managed identity after the chain.
func TestDefaultCredentialChoice(t *testing.T) {
	const id = "11111111-1111-1111-1111-111111111111"
	cases := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "*azidentity.DefaultAzureCredential"},
		{map[string]string{"AZURE_CLIENT_ID": id}, "*azidentity.DefaultAzureCredential"},
		{map[string]string{"AZURE_CLIENT_ID": id, "AZURE_TENANT_ID": "t", "AZURE_FEDERATED_TOKEN_FILE": "/var/run/secrets/token"}, "*azidentity.DefaultAzureCredential"},
		{map[string]string{"AZURE_CLIENT_ID": id, "AZURE_CLIENT_SECRET": "s", "AZURE_TENANT_ID": "t"}, "*azidentity.DefaultAzureCredential"},
		{map[string]string{"DEFAULT_IDENTITY_CLIENT_ID": id}, "*azidentity.ChainedTokenCredential"},
	}
	for _, c := range cases {
		setCredentialEnv(t, c.env)
		cred, err := defaultCredential(slog.New(slog.DiscardHandler), azidentity.DefaultAzureCredentialOptions{})
		if err != nil {
			t.Fatalf("%v: %v", c.env, err)
		}
		if got := fmt.Sprintf("%T", cred); got != c.want {
			t.Errorf("with %v: credential %s, want %s", c.env, got, c.want)
		}
	}
}

// TestWorkloadIdentityWithClientID: as on AKS with workload identity
// (AZURE_CLIENT_ID, AZURE_TENANT_ID and AZURE_FEDERATED_TOKEN_FILE set by
// the webhook), the credential exchanges the federated token from the file
// for an access token. The authority is a fake on a loopback port.
func TestWorkloadIdentityWithClientID(t *testing.T) {
	const (
		clientID = "22222222-2222-2222-2222-222222222222"
		tenant   = "33333333-3333-3333-3333-333333333333"
		assert   = "federated.token.from.the.projected.volume"
	)
	var (
		mu   sync.Mutex
		seen = map[string]string{}
	)
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := srv.URL + "/" + tenant
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/discovery/instance"):
			_ = json.NewEncoder(w).Encode(map[string]any{
				"tenant_discovery_endpoint": base + "/v2.0/.well-known/openid-configuration",
				"api-version":               "1.1",
				"metadata":                  []any{},
			})
		case strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration"):
			_ = json.NewEncoder(w).Encode(map[string]any{
				"authorization_endpoint": base + "/oauth2/v2.0/authorize",
				"token_endpoint":         base + "/oauth2/v2.0/token",
				"issuer":                 base + "/v2.0",
			})
		case strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token"):
			_ = r.ParseForm()
			mu.Lock()
			seen["client_id"] = r.PostForm.Get("client_id")
			seen["client_assertion"] = r.PostForm.Get("client_assertion")
			mu.Unlock()
			_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "tok", "expires_in": 3600, "token_type": "Bearer"})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "azure-identity-token")
	if err := os.WriteFile(file, []byte(assert), 0o600); err != nil {
		t.Fatal(err)
	}
	setCredentialEnv(t, map[string]string{
		"AZURE_CLIENT_ID":            clientID,
		"AZURE_TENANT_ID":            tenant,
		"AZURE_FEDERATED_TOKEN_FILE": file,
		"AZURE_AUTHORITY_HOST":       srv.URL,
	})
	cred, err := defaultCredential(slog.New(slog.DiscardHandler), azidentity.DefaultAzureCredentialOptions{
		ClientOptions: azcore.ClientOptions{Transport: srv.Client()},
		// Discovery would ask login.microsoftonline.com about the fake.
		DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tok, err := cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{"https://storage.azure.com/.default"}})
	if err != nil {
		t.Fatalf("get a token through workload identity: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if tok.Token != "tok" || seen["client_id"] != clientID || seen["client_assertion"] != assert {
		t.Errorf("token %q; the authority saw client_id %q and client_assertion %q, want %q and the token file's content",
			tok.Token, seen["client_id"], seen["client_assertion"], clientID)
	}
}

func TestCheckAccountKey(t *testing.T) {
	t.Parallel()
	const secret = "c2VjcmV0c2VjcmV0"
	cases := []struct {
		cs   string
		want string // "" for no error
	}{
		{"AccountName=a;AccountKey=" + secret + ";EndpointSuffix=core.windows.net", ""},
		{"AccountName=a;AccountKey=" + secret[:9] + "*;EndpointSuffix=core.windows.net", "AccountKey in the connection string from $X is not valid base64"},
		{"AccountName=a;AccountKey=;EndpointSuffix=core.windows.net", "AccountKey in the connection string from $X is empty"},
		{"accountkey=" + secret + "%%", "not valid base64"},
		{"QueueEndpoint=https://a.queue.core.windows.net;SharedAccessSignature=sv=1&sig=abc", ""},
	}
	for _, c := range cases {
		err := checkAccountKey(c.cs, "$X")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want no error", c.cs, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want an error with %q", c.cs, err, c.want)
		case err != nil && strings.Contains(err.Error(), secret[:9]):
			t.Errorf("the error shows the key: %v", err)
		}
	}
}
