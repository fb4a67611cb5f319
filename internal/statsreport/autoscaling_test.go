package statsreport_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	azq "github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"

	"github.com/jobq/jobq"
	"github.com/jobq/jobq/backends/azqueue"
	_ "github.com/jobq/jobq/backends/postgres"
	_ "github.com/jobq/jobq/backends/redis"
)

// autoscalingDoc is the page whose KEDA examples these tests check.
const autoscalingDoc = "../../docs/autoscaling.md"

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(autoscalingDoc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// uniqueQueue is a queue name no other test run uses.
func uniqueQueue(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// fill pushes five tasks and two delayed ones, takes three and
// dead-letters one of those: 2 ready, 2 in flight, 2 delayed, 1 dead.
func fill(ctx context.Context, t *testing.T, q *jobq.Queue) {
	t.Helper()
	for i := range 5 {
		if _, err := q.Push(ctx, &jobq.Task{Command: "echo " + string(rune('a'+i))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if _, err := q.Push(ctx, &jobq.Task{Command: "echo later " + string(rune('a'+i)), NotBefore: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	envs, err := q.ReceiveBatch(ctx, 3, jobq.ReceiveOptions{Visibility: time.Hour})
	if err != nil || len(envs) != 3 {
		t.Fatalf("receive: %d envelopes, %v; want 3", len(envs), err)
	}
	if err := envs[0].DeadLetter(ctx, "test", ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_, _ = q.Admin().Clear(ctx)
		_, _ = q.Admin().PurgeDeadLetters(ctx)
		_ = q.Close()
	})
}

// TestKEDAPostgresQuery runs the exact query docs/autoscaling.md gives for
// KEDA's postgresql scaler on a live queue and compares it with Stats.
func TestKEDAPostgresQuery(t *testing.T) {
	t.Parallel()
	doc := readDoc(t)
	m := regexp.MustCompile(`(?m)^\s+query: "(.+)"$`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("docs/autoscaling.md has no postgresql query: line")
	}
	query := m[1]
	if !strings.Contains(doc, "```sql\n"+query+"\n```") {
		t.Fatalf("the query in the ScaledObject differs from the one in the sql block: %s", query)
	}
	base := documentedDefaults(t, "JOBQ_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	name := uniqueQueue("keda_")
	ctx := t.Context()
	q, err := jobq.Open(ctx, withQueue(t, base, name))
	if err != nil {
		t.Fatalf("opening a Postgres queue (is Postgres running? .ci/start-postgres.sh): %v", err)
	}
	fill(ctx, t, q)
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	const docQueue = "'render'"
	if !strings.Contains(query, docQueue) {
		t.Fatalf("the query does not name the queue %s: %s", docQueue, query)
	}
	var got int64
	if err := conn.QueryRow(ctx, strings.Replace(query, docQueue, "'"+name+"'", 1)).Scan(&got); err != nil {
		t.Fatalf("running the documented query: %v", err)
	}
	st, err := q.Admin().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := st.Ready + st.InFlight; got != want || want != 4 {
		t.Errorf("the documented query counts %d; stats says ready %d + in flight %d = %d (want 4)", got, st.Ready, st.InFlight, want)
	}
}

// documentedDefaults is the test server's URL from env (def without it)
// without jobq's schema= and prefix=: the query and key the docs give name
// the default schema and prefix (the queue names are unique).
func documentedDefaults(t *testing.T, env, def string) string {
	t.Helper()
	s := def
	if v := os.Getenv(env); v != "" {
		s = v
	}
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("%s: %v", env, err)
	}
	v := u.Query()
	v.Del("schema")
	v.Del("prefix")
	v.Del("queue")
	u.RawQuery = v.Encode()
	return u.String()
}

// withQueue is base with queue=name.
func withQueue(t *testing.T, base, name string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	v := u.Query()
	v.Set("queue", name)
	u.RawQuery = v.Encode()
	return u.String()
}

// TestKEDARedisKey reads the key docs/autoscaling.md gives for KEDA's redis
// scaler the way that scaler does (TYPE, then the length command of that
// type) and checks the documented relation: the ready count plus one.
func TestKEDARedisKey(t *testing.T) {
	t.Parallel()
	doc := readDoc(t)
	m := regexp.MustCompile(`(?m)^\s+listName: "(.+)"$`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("docs/autoscaling.md has no redis listName: line")
	}
	const docQueue = "{render}"
	if !strings.Contains(m[1], docQueue) {
		t.Fatalf("the listName does not name the queue %s: %s", docQueue, m[1])
	}
	base := documentedDefaults(t, "JOBQ_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
	name := uniqueQueue("keda-")
	ctx := t.Context()
	q, err := jobq.Open(ctx, withQueue(t, base, name))
	if err != nil {
		t.Fatalf("opening a Redis queue (is Redis running? .ci/start-redis.sh): %v", err)
	}
	fill(ctx, t, q)
	opts, err := goredis.ParseURL(base)
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewClient(opts)
	defer client.Close()
	key := strings.Replace(m[1], docQueue, "{"+name+"}", 1)
	// KEDA's scaler: the length command that fits the key's type.
	length := goredis.NewScript(`
local kind = redis.call('TYPE', KEYS[1]).ok
local lengths = {list = 'LLEN', set = 'SCARD', zset = 'ZCARD', hash = 'HLEN', none = 'LLEN'}
return redis.call(lengths[kind], KEYS[1])`)
	got, err := length.Run(ctx, client, []string{key}).Int64()
	if err != nil {
		t.Fatalf("reading %s as KEDA does: %v", key, err)
	}
	st, err := q.Admin().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got != st.Ready+1 || st.Ready != 2 {
		t.Errorf("KEDA would read %d from %s; stats says ready %d (the doc promises ready + 1, with 2 ready)", got, key, st.Ready)
	}
}

// TestKEDAAzureQueueName checks what docs/autoscaling.md tells KEDA's
// azure-queue scaler: the jobq queue is the storage queue of the same
// name, whose approximate count is what stats shows as ready. It runs on
// Azurite (.ci/start-azurite.sh).
func TestKEDAAzureQueueName(t *testing.T) {
	t.Parallel()
	doc := readDoc(t)
	m := regexp.MustCompile(`(?s)type: azure-queue\n.*?queueName: "([^"]+)"`).FindStringSubmatch(doc)
	if m == nil || m[1] != "render" {
		t.Fatalf("docs/autoscaling.md's azure-queue trigger has no queueName \"render\": %v", m)
	}
	name := uniqueQueue("keda-")
	ctx := t.Context()
	q, err := jobq.OpenWithOptions(ctx, "azqueue://devstoreaccount1/"+name, jobq.Options{ConnectionString: azqueue.DevelopmentConnectionString})
	if err != nil {
		t.Fatalf("opening an Azure Storage queue on Azurite (is it running? .ci/start-azurite.sh): %v", err)
	}
	defer q.Close()
	for _, c := range []string{"echo a", "echo b", "echo c"} {
		if _, err := q.Push(ctx, &jobq.Task{Command: c}); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := azq.NewServiceClientFromConnectionString(azqueue.DevelopmentConnectionString, nil)
	if err != nil {
		t.Fatal(err)
	}
	qc := svc.NewQueueClient(name) // the doc's queueName, for this queue
	t.Cleanup(func() {
		_, _ = qc.Delete(context.Background(), nil)
		_, _ = svc.NewQueueClient(name+"-failed").Delete(context.Background(), nil)
	})
	props, err := qc.GetProperties(ctx, nil)
	if err != nil {
		t.Fatalf("the storage queue %s, which KEDA would read: %v", name, err)
	}
	st, err := q.Admin().Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if props.ApproximateMessagesCount == nil || int64(*props.ApproximateMessagesCount) != st.Ready || st.Ready != 3 {
		t.Errorf("KEDA would read %v messages from %s; stats says ready %d (want both 3)", props.ApproximateMessagesCount, name, st.Ready)
	}
}
