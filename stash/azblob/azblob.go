// Package azblob is the jobq stash store on Azure Blob Storage, where
// ai4s-jobq keeps large payloads too, through Microsoft's SDK
// (github.com/Azure/azure-sdk-for-go/sdk/storage/azblob). Importing it
// registers the scheme "azblob" on stash.DefaultURLMux:
//
//	import _ "github.com/jobq/jobq/stash/azblob"
//
//	azblob://ACCOUNT/CONTAINER[/PREFIX]
//
// Objects are block blobs named PREFIX/<sha256>, written create-only
// (If-None-Match: *) with content type application/json and a sha256
// metadata entry. The container must exist.
//
// # Credentials
//
// A connection string is used when its account is the URL's: the first of
// URLOpener.ConnectionString (the jobq CLI puts its --conn-str there, on a
// URLMux of its own), $JOBQ_CONNECTION_STRING and
// $AZURE_STORAGE_CONNECTION_STRING whose AccountName
// (or BlobEndpoint) names that account. "UseDevelopmentStorage=true" means
// Azurite's blob service on 127.0.0.1:10000 with its public development
// account devstoreaccount1. Otherwise the store signs in with Microsoft
// Entra ID: URLOpener.Credential when set, else DefaultAzureCredential (az
// login, environment variables, workload or managed identity), at
// https://ACCOUNT.blob.core.windows.net. Keys and SAS tokens never appear
// in locations, logs or errors. Programs that hold a container client call
// New instead.
package azblob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"

	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/stash"
)

// Scheme is the URL scheme this package registers.
const Scheme = "azblob"

// Environment variables read for a connection string, in order.
const (
	// EnvConnectionString is jobq's own variable (the CLI's --conn-str
	// defaults to it).
	EnvConnectionString = "JOBQ_CONNECTION_STRING"
	// EnvAzureConnectionString is the Azure SDKs' conventional variable.
	EnvAzureConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
)

// DevelopmentConnectionString is the connection string of Azurite's blob
// service on 127.0.0.1:10000 with its public development account.
// "UseDevelopmentStorage=true" expands to it.
const DevelopmentConnectionString = "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;" +
	"AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;" +
	"BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;"

// DefaultOpener is the opener registered for azblob://. Programs may set
// its fields before opening stores.
var DefaultOpener = &URLOpener{}

func init() { stash.Register(Scheme, DefaultOpener) }

// URLOpener opens azblob://ACCOUNT/CONTAINER/PREFIX URLs.
type URLOpener struct {
	// ConnectionString, when set and its account is the URL's, is used
	// instead of the environment's.
	ConnectionString string
	// Credential, when set, authenticates URLs that no connection string
	// serves, instead of DefaultAzureCredential.
	Credential azcore.TokenCredential
	// ClientOptions configure the SDK clients (retries, transport).
	ClientOptions *container.ClientOptions
}

// String describes the opener for debugging without credentials.
func (o *URLOpener) String() string {
	return fmt.Sprintf("azblob.URLOpener{connection string set: %t, credential set: %t}", o.ConnectionString != "", o.Credential != nil)
}

var (
	accountName = regexp.MustCompile(`^[a-z0-9]{3,24}$`)
	// containerChars is the character rule of container names; their
	// length is checked apart, as a repetition of one- and two-character
	// groups cannot bound it.
	containerChars = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9])*$`)
)

// ValidContainerName reports whether Azure accepts name as a blob
// container's: 3 to 63 lowercase letters, digits and single hyphens,
// starting and ending with a letter or digit.
func ValidContainerName(name string) bool {
	return len(name) >= 3 && len(name) <= 63 && containerChars.MatchString(name)
}

// OpenStoreURL opens the store u names.
func (o *URLOpener) OpenStoreURL(_ context.Context, u *url.URL) (stash.Store, error) {
	account := u.Host
	cont, prefix, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if !accountName.MatchString(account) {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash URL %q: storage account %q is not 3 to 24 lowercase letters and digits; use azblob://ACCOUNT/CONTAINER/prefix", u.Redacted(), account)
	}
	if !ValidContainerName(cont) {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash URL %q: container %q is not 3 to 63 lowercase letters, digits and single hyphens; use azblob://ACCOUNT/CONTAINER/prefix", u.Redacted(), cont)
	}
	client, err := o.containerClient(account, cont)
	if err != nil {
		return nil, err
	}
	return newStore(client, account, cont, prefix), nil
}

// ContainerClient returns the SDK client for container cont of account,
// authenticated as the store URLs are (see the package documentation). The
// Azure backends use it for their result-record containers.
func (o *URLOpener) ContainerClient(account, cont string) (*container.Client, error) {
	return o.containerClient(account, cont)
}

// containerClient builds the SDK client for the container, with a
// connection string for the account if one is given, else with Entra ID.
func (o *URLOpener) containerClient(account, cont string) (*container.Client, error) {
	if cs, from := o.connectionString(account); cs != "" {
		c, err := container.NewClientFromConnectionString(cs, cont, o.ClientOptions)
		if err != nil {
			return nil, driver.Errorf(errcode.InvalidArgument, "stash azblob://%s/%s: the connection string from %s is malformed: expected AccountName=...;AccountKey=...[;BlobEndpoint=...] or a BlobEndpoint with a SharedAccessSignature", account, cont, from)
		}
		return c, nil
	}
	cred := o.Credential
	if cred == nil {
		var err error
		cred, err = azidentity.NewDefaultAzureCredential(nil)
		if err != nil {
			return nil, driver.Errorf(errcode.PermissionDenied, "stash azblob://%s/%s: no Azure credential available: %w (sign in with `az login`, run with a managed identity, or give a connection string for account %s in $%s)", account, cont, err, account, EnvAzureConnectionString)
		}
	}
	c, err := container.NewClient("https://"+account+".blob.core.windows.net/"+cont, cred, o.ClientOptions)
	if err != nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash azblob://%s/%s: %w", account, cont, err)
	}
	return c, nil
}

// connectionString returns the first connection string given for account
// and where it came from, or "" when there is none.
func (o *URLOpener) connectionString(account string) (cs, from string) {
	candidates := [][2]string{{o.ConnectionString, "URLOpener.ConnectionString"}}
	for _, env := range []string{EnvConnectionString, EnvAzureConnectionString} {
		candidates = append(candidates, [2]string{os.Getenv(env), "$" + env})
	}
	for _, c := range candidates {
		s := strings.TrimSpace(c[0])
		if strings.EqualFold(strings.TrimRight(s, ";"), "UseDevelopmentStorage=true") {
			s = DevelopmentConnectionString
		}
		if s != "" && connectionAccount(s) == account {
			return s, c[1]
		}
	}
	return "", ""
}

// connectionAccount names the account of a connection string: its
// AccountName, else the account of its BlobEndpoint (the host's first
// label, or the first path element of an emulator's endpoint such as
// http://127.0.0.1:10000/devstoreaccount1).
func connectionAccount(cs string) string {
	var endpoint string
	for part := range strings.SplitSeq(cs, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case strings.EqualFold(k, "AccountName"):
			return v
		case strings.EqualFold(k, "BlobEndpoint"):
			endpoint = v
		}
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return ""
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		first, _, _ := strings.Cut(p, "/")
		return first
	}
	first, _, _ := strings.Cut(u.Hostname(), ".")
	return first
}

// New returns a store under prefix in the container client serves, named
// azblob://account/CONTAINER/prefix in references, where account is the
// storage account (which a receiver's credentials must reach). The caller
// keeps the client.
func New(client *container.Client, account, prefix string) (stash.Store, error) {
	if client == nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash azblob: New needs a container client; use stash.Open with an azblob:// URL for the default credentials")
	}
	u, err := url.Parse(client.URL())
	if err != nil {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash azblob: container URL does not parse: %v", err)
	}
	cont := u.Path[strings.LastIndex(strings.TrimRight(u.Path, "/"), "/")+1:]
	cont = strings.TrimRight(cont, "/")
	if !accountName.MatchString(account) {
		return nil, driver.Errorf(errcode.InvalidArgument, "stash azblob: storage account %q is not 3 to 24 lowercase letters and digits", account)
	}
	return newStore(client, account, cont, prefix), nil
}

// store keeps objects as block blobs in a container under a prefix.
type store struct {
	client *container.Client
	prefix string // "" or "dir/sub/"
	loc    string
}

func newStore(client *container.Client, account, cont, prefix string) *store {
	prefix = strings.Trim(prefix, "/")
	loc := "azblob://" + account + "/" + cont
	if prefix != "" {
		loc += "/" + prefix
		prefix += "/"
	}
	return &store{client: client, prefix: prefix, loc: loc}
}

func (s *store) Location() string { return s.loc }

// Close does nothing: the SDK's clients hold no connections of their own.
func (s *store) Close() error { return nil }

func (s *store) blob(name string) *blockblob.Client {
	return s.client.NewBlockBlobClient(s.prefix + name)
}

func (s *store) Put(ctx context.Context, data []byte) (stash.Object, error) {
	name := stash.Sum(data)
	obj := stash.Object{URL: s.loc + "/" + name, SHA256: name, Size: int64(len(data))}
	// If-None-Match: * makes the upload create-only. A retry after a lost
	// response then finds the object, which for a content-addressed name
	// holds the same bytes: success.
	_, err := s.blob(name).Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), &blockblob.UploadOptions{
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: to.Ptr("application/json")},
		Metadata:    map[string]*string{"sha256": to.Ptr(name)},
		AccessConditions: &blob.AccessConditions{ModifiedAccessConditions: &blob.ModifiedAccessConditions{
			IfNoneMatch: to.Ptr(azcore.ETagAny),
		}},
	})
	switch {
	case err == nil:
		obj.Created = true
		return obj, nil
	case bloberror.HasCode(err, bloberror.BlobAlreadyExists, bloberror.ConditionNotMet):
		return obj, nil // already there (perhaps from the SDK's earlier attempt)
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		return stash.Object{}, s.errorf(err, "the container does not exist (create it, or fix the stash URL)")
	default:
		return stash.Object{}, s.errorf(err, "write object %s", name)
	}
}

func (s *store) Get(ctx context.Context, name string, limit int64) ([]byte, error) {
	if err := stash.CheckName(name); err != nil {
		return nil, err
	}
	var rng blob.HTTPRange // the whole blob
	if limit >= 0 {
		rng.Count = max(limit, 1) // Count 0 would mean to the end
	}
	resp, err := s.blob(name).DownloadStream(ctx, &blob.DownloadStreamOptions{Range: rng})
	switch {
	case bloberror.HasCode(err, bloberror.BlobNotFound):
		return nil, stash.NotFoundError(s.loc, name, err)
	case bloberror.HasCode(err, bloberror.InvalidRange):
		return []byte{}, nil // an empty blob: no byte 0 to start at
	case err != nil:
		return nil, s.errorf(err, "read object %s", name)
	}
	defer resp.Body.Close()
	data, err := stash.ReadLimited(resp.Body, limit)
	if err != nil {
		return nil, s.errorf(err, "read object %s", name)
	}
	return data, nil
}

func (s *store) Delete(ctx context.Context, name string) error {
	if err := stash.CheckName(name); err != nil {
		return err
	}
	_, err := s.blob(name).Delete(ctx, nil)
	if err == nil || bloberror.HasCode(err, bloberror.BlobNotFound) {
		return nil
	}
	return s.errorf(err, "delete object %s", name)
}

// errorf classifies a Blob Storage error: the code decides whether a
// receiver dead-letters a message (NotFound, InvalidArgument) or leaves it
// for later (the others). The SDK has retried what it could by then.
func (s *store) errorf(err error, format string, args ...any) error {
	code := errcode.Unavailable // network, throttling, 5xx
	var re *azcore.ResponseError
	var af *azidentity.AuthenticationFailedError
	switch {
	case errors.As(err, &re):
		switch {
		case re.StatusCode == http.StatusNotFound:
			code = errcode.NotFound // the container
		case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
			code = errcode.PermissionDenied
			format += " (check the credentials: the identity needs the \"Storage Blob Data Contributor\" role on the container, or the connection string's key or SAS must allow read, create and delete)"
		case re.StatusCode == http.StatusBadRequest:
			code = errcode.InvalidArgument
		}
	case errors.As(err, &af):
		code = errcode.PermissionDenied
		format += " (Entra ID refused the credentials: sign in again with `az login`, or check the managed identity)"
	}
	if c := errcode.Of(err); c == errcode.Canceled || c == errcode.DeadlineExceeded {
		code = c
	}
	return stash.WrapError(code, err, "stash "+s.loc+": "+format, args...)
}

// Replace uploads data as the blob name in one Put Blob request, which
// Blob Storage applies whole or not at all.
func (s *store) Replace(ctx context.Context, name string, data []byte) error {
	if err := stash.CheckName(name); err != nil {
		return err
	}
	_, err := s.blob(name).Upload(ctx, streaming.NopCloser(bytes.NewReader(data)), &blockblob.UploadOptions{
		HTTPHeaders: &blob.HTTPHeaders{BlobContentType: to.Ptr("application/json")},
	})
	switch {
	case err == nil:
		return nil
	case bloberror.HasCode(err, bloberror.ContainerNotFound):
		return s.errorf(err, "the container does not exist (create it, or fix the stash URL)")
	default:
		return s.errorf(err, "replace object %s", name)
	}
}
