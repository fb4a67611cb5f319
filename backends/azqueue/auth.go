package azqueue

import (
	"encoding/base64"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/internal/redact"
)

// connectionString returns the connection string to use and where it came
// from, or "" when there is none.
func (o *URLOpener) connectionString(given string) (string, string) {
	if s := strings.TrimSpace(given); s != "" {
		return s, "the program (--conn-str)"
	}
	if o.ConnectionString != "" {
		return o.ConnectionString, "URLOpener.ConnectionString"
	}
	for _, env := range []string{EnvConnectionString, EnvAzureConnectionString} {
		if s := strings.TrimSpace(os.Getenv(env)); s != "" {
			from := "$" + env
			return s, from
		}
	}
	return "", ""
}

// clientOptions carries the URL's retry settings into the SDK, whose retry
// policy handles throttling (503 ServerBusy, 500 OperationTimedOut) and
// transport errors with exponential backoff.
func clientOptions(c config) *azqueue.ClientOptions {
	retries := int32(c.retries)
	if retries == 0 {
		retries = -1 // azcore: 0 means its default of 3, -1 means none
	}
	return &azqueue.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry: policy.RetryOptions{
			MaxRetries:    retries,
			RetryDelay:    c.retryDelay,
			MaxRetryDelay: 30 * time.Second,
			StatusCodes:   []int{408, 429, 500, 502, 503, 504},
		},
		PerRetryPolicies: []policy.Policy{ambiguityPolicy{}},
	}}
}

// client builds the SDK client for the queue service. where names the
// account for messages (never a secret). given is the connection string
// the program passed in driver.OpenOptions.
// src builds the result container's client with the same credentials.
func (o *URLOpener) client(c config, given string, log *slog.Logger) (svc *azqueue.ServiceClient, where string, src resultsSource, err error) {
	opts := clientOptions(c)
	if cs, from := o.connectionString(given); cs != "" {
		if c.endpoint != "" {
			return nil, "", nil, driver.Errorf(errcode.InvalidArgument,
				"endpoint= and the connection string from %s both name the queue service, and the connection string would win: drop endpoint= to use the connection string, or unset it (%s, $%s, $%s) to use the endpoint with Microsoft Entra ID",
				from, "--conn-str", EnvConnectionString, EnvAzureConnectionString)
		}
		if strings.EqualFold(strings.TrimRight(strings.TrimSpace(cs), ";"), "UseDevelopmentStorage=true") {
			cs = DevelopmentConnectionString
		}
		if err := checkAccountKey(cs, from); err != nil {
			return nil, "", nil, err
		}
		svc, err := azqueue.NewServiceClientFromConnectionString(cs, opts)
		if err != nil {
			return nil, "", nil, driver.Errorf(errcode.InvalidArgument,
				"the connection string from %s is malformed (%s): expected AccountName=...;AccountKey=... or a QueueEndpoint with a SharedAccessSignature", from, redact.String(cs))
		}
		where = serviceAccount(svc.URL())
		if c.account != "" && where != "" && c.account != where {
			log.Info("azqueue: using the connection string's account; the account in the URL is ignored",
				"connection_string_from", from, "account", where, "url_account", c.account)
		}
		return svc, where, fromConnectionString(cs), nil
	}
	if c.account == "" && c.endpoint == "" {
		return nil, "", nil, driver.Errorf(errcode.InvalidArgument,
			"no storage account: use azqueue://ACCOUNT/QUEUE, or give a connection string with --conn-str, $%s or $%s", EnvConnectionString, EnvAzureConnectionString)
	}
	if c.account != "" && !accountName.MatchString(c.account) {
		return nil, "", nil, driver.Errorf(errcode.InvalidArgument,
			"invalid storage account name %q: it is 3 to 24 lowercase letters and digits", c.account)
	}
	serviceURL := c.endpoint
	if serviceURL == "" {
		serviceURL = "https://" + c.account + ".queue.core.windows.net/"
	}
	cred := o.Credential
	if cred == nil {
		cred, err = defaultCredential(log, azidentity.DefaultAzureCredentialOptions{})
		if err != nil {
			return nil, "", nil, driver.Errorf(errcode.PermissionDenied,
				"no Azure credential available for account %s: %w (give a connection string with --conn-str or $%s, or sign in with `az login`, or run with a managed identity)",
				c.account, err, EnvConnectionString)
		}
	}
	svc, err = azqueue.NewServiceClient(serviceURL, cred, opts)
	if err != nil {
		return nil, "", nil, driver.Errorf(errcode.InvalidArgument, "cannot use queue service %s: %w", serviceURL, err)
	}
	where = c.account
	if where == "" {
		where = serviceAccount(serviceURL)
	}
	return svc, where, fromCredential(serviceURL, cred), nil
}

// EnvIdentityClientID names a managed identity to try after the
// DefaultAzureCredential chain: Azure ML sets it on compute whose assigned
// identity should be used, and ai4s-jobq reads it the same way.
const EnvIdentityClientID = "DEFAULT_IDENTITY_CLIENT_ID"

// defaultCredential is azidentity's DefaultAzureCredential chain: the
// environment's service principal, AKS workload identity
// ($AZURE_FEDERATED_TOKEN_FILE), a managed identity ($AZURE_CLIENT_ID names
// a user-assigned one), then the Azure CLI's and Azure Developer CLI's
// sign-in. With $DEFAULT_IDENTITY_CLIENT_ID, a managed identity with that
// client ID is tried after the chain, as ai4s-jobq does. opts are the
// zero value but in tests, which point them at a fake authority.
func defaultCredential(log *slog.Logger, opts azidentity.DefaultAzureCredentialOptions) (azcore.TokenCredential, error) {
	chain, err := azidentity.NewDefaultAzureCredential(&opts)
	if err != nil {
		return nil, err
	}
	id := os.Getenv(EnvIdentityClientID)
	if id == "" {
		log.Debug("azqueue: authenticating with DefaultAzureCredential")
		return chain, nil
	}
	mi, err := azidentity.NewManagedIdentityCredential(&azidentity.ManagedIdentityCredentialOptions{ClientOptions: opts.ClientOptions, ID: azidentity.ClientID(id)})
	if err != nil {
		return nil, err
	}
	log.Debug("azqueue: authenticating with DefaultAzureCredential, then the managed identity of $"+EnvIdentityClientID, "client_id", id)
	return azidentity.NewChainedTokenCredential([]azcore.TokenCredential{chain, mi}, nil)
}

// checkAccountKey reports a malformed AccountKey in a connection string by
// name, never by value. The SDK's own error does not say which part is
// wrong.
func checkAccountKey(cs, from string) error {
	for _, part := range strings.Split(cs, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(k), "AccountKey") {
			continue
		}
		// Base64 keys end in '=', which Cut leaves in v.
		v = strings.TrimSpace(v)
		switch _, err := base64.StdEncoding.DecodeString(v); {
		case v == "":
			return driver.Errorf(errcode.InvalidArgument,
				"the AccountKey in the connection string from %s is empty: copy the account's key again (Azure portal, storage account, Access keys; or `az storage account keys list`)", from)
		case err != nil:
			return driver.Errorf(errcode.InvalidArgument,
				"the AccountKey in the connection string from %s is not valid base64 (%d characters): it was probably cut or altered when copied; copy the account's key again (Azure portal, storage account, Access keys; or `az storage account keys list`)",
				from, len(v))
		}
	}
	return nil
}

// serviceAccount names the account of a queue service URL: the first label
// of the host, or the first path element for emulator-style URLs
// (http://127.0.0.1:10001/devstoreaccount1).
func serviceAccount(serviceURL string) string {
	u, err := url.Parse(serviceURL)
	if err != nil {
		return ""
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		return strings.SplitN(p, "/", 2)[0]
	}
	return strings.SplitN(u.Hostname(), ".", 2)[0]
}
