package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jobq/jobq"
	_ "github.com/jobq/jobq/backends/sqlite"
	"github.com/jobq/jobq/driver"
	"github.com/jobq/jobq/errcode"
	"github.com/jobq/jobq/tools/testkit/syncbuf"
)

// openQueue opens a fresh SQLite queue with dead dead letters, whose
// reasons and details quote a credential.
func openQueue(t *testing.T, dead int) *jobq.Queue {
	t.Helper()
	ctx := t.Context()
	q, err := jobq.Open(ctx, "sqlite://"+filepath.Join(t.TempDir(), "q.db")+"?queue=dash")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Close() })
	for i := range dead {
		if _, err := q.Push(ctx, &jobq.Task{Command: "psql postgres://app:hunter2@db/x -c 'select " + string(rune('0'+i)) + "'"}); err != nil {
			t.Fatal(err)
		}
		env, err := q.Receive(ctx, jobq.ReceiveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := env.DeadLetter(ctx, "failed to reach postgres://app:hunter2@db/x", "connecting to postgres://app:hunter2@db/x\nerror: refused"); err != nil {
			t.Fatal(err)
		}
	}
	return q
}

func newServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// do sends a request to the server's handler, from Host 127.0.0.1:8080
// unless the request says otherwise.
func do(s *Server, r *http.Request) *httptest.ResponseRecorder {
	if r.Host == "example.com" { // httptest.NewRequest's default
		r.Host = "127.0.0.1:8080"
	}
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, r)
	return w
}

func TestNewChecksTheAddress(t *testing.T) {
	t.Parallel()
	q := openQueue(t, 0)
	tests := []struct {
		addr, token string
		wantErr     string
	}{
		{"127.0.0.1:8080", "", ""},
		{"127.0.0.2:0", "", ""},
		{"[::1]:8080", "", ""},
		{"localhost:8080", "", ""},
		{"0.0.0.0:8080", "", "give a token"},
		{":8080", "", "give a token"},
		{"10.1.2.3:80", "", "give a token"},
		{"0.0.0.0:8080", "secret", ""},
		{"8080", "", "not host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.addr+"/"+tt.token, func(t *testing.T) {
			t.Parallel()
			_, err := New(Config{Queue: q, Addr: tt.addr, Token: tt.token})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("New(%q): %v", tt.addr, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("New(%q) = %v; want an error saying %q", tt.addr, err, tt.wantErr)
			}
		})
	}
}

func TestGuard(t *testing.T) {
	t.Parallel()
	q := openQueue(t, 0)
	open := newServer(t, Config{Queue: q})
	locked := newServer(t, Config{Queue: q, Addr: "0.0.0.0:0", Token: "s3cret"})
	tests := []struct {
		name       string
		s          *Server
		host, auth string
		cookie     string
		path       string
		wantStatus int
	}{
		{"loopback", open, "127.0.0.1:8080", "", "", "/api/stats", http.StatusOK},
		{"localhost", open, "localhost:8080", "", "", "/api/stats", http.StatusOK},
		{"ipv6 loopback", open, "[::1]:8080", "", "", "/", http.StatusOK},
		{"rebound name", open, "evil.example:8080", "", "", "/api/stats", http.StatusMisdirectedRequest},
		{"no token", locked, "jobq.internal:8080", "", "", "/api/stats", http.StatusUnauthorized},
		{"wrong token", locked, "jobq.internal:8080", "Bearer nope", "", "/api/stats", http.StatusUnauthorized},
		{"bearer", locked, "jobq.internal:8080", "Bearer s3cret", "", "/api/stats", http.StatusOK},
		{"cookie", locked, "jobq.internal:8080", "", "s3cret", "/", http.StatusOK},
		{"query token", locked, "jobq.internal:8080", "", "", "/?token=s3cret", http.StatusSeeOther},
		{"query token on the API", locked, "jobq.internal:8080", "", "", "/api/stats?token=s3cret", http.StatusOK},
		{"wrong query token", locked, "jobq.internal:8080", "", "", "/?token=nope", http.StatusUnauthorized},
		{"unknown path", open, "127.0.0.1:8080", "", "", "/nothing", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(http.MethodGet, tt.path, nil)
			r.Host = tt.host
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			if tt.cookie != "" {
				r.AddCookie(&http.Cookie{Name: tokenCookie, Value: tt.cookie})
			}
			w := do(tt.s, r)
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d; want %d (%s)", w.Code, tt.wantStatus, w.Body)
			}
			if csp := w.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("Content-Security-Policy %q", csp)
			}
			if tt.wantStatus == http.StatusSeeOther {
				if loc := w.Header().Get("Location"); strings.Contains(loc, "token") {
					t.Errorf("the redirect keeps the token in the address: %q", loc)
				}
				if c := w.Result().Cookies(); len(c) != 1 || c[0].Value != "s3cret" || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
					t.Errorf("cookies %v; want one HttpOnly, SameSite=Strict token cookie", c)
				}
			}
		})
	}
}

// TestMutationsAreSameOrigin sends requeues that a cross-site page could
// forge; only the one the page itself sends moves a dead letter.
func TestMutationsAreSameOrigin(t *testing.T) {
	t.Parallel()
	q := openQueue(t, 1)
	s := newServer(t, Config{Queue: q})
	tests := []struct {
		name       string
		method     string
		headers    map[string]string
		body       string
		wantStatus int
	}{
		{"GET", http.MethodGet, map[string]string{csrfHeader: s.csrf}, "", http.StatusNotFound},
		{"no CSRF token", http.MethodPost, nil, `{"all":true}`, http.StatusForbidden},
		{"wrong CSRF token", http.MethodPost, map[string]string{csrfHeader: "guess"}, `{"all":true}`, http.StatusForbidden},
		{"other origin", http.MethodPost, map[string]string{csrfHeader: s.csrf, "Origin": "http://evil.example"}, `{"all":true}`, http.StatusForbidden},
		{"cross-site", http.MethodPost, map[string]string{csrfHeader: s.csrf, "Sec-Fetch-Site": "cross-site"}, `{"all":true}`, http.StatusForbidden},
		{"bad body", http.MethodPost, map[string]string{csrfHeader: s.csrf}, `all`, http.StatusBadRequest},
		{"ids and all", http.MethodPost, map[string]string{csrfHeader: s.csrf}, `{"all":true,"ids":["1"]}`, http.StatusBadRequest},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(tt.method, "/api/deadletters/requeue", strings.NewReader(tt.body))
		for k, v := range tt.headers {
			r.Header.Set(k, v)
		}
		if w := do(s, r); w.Code != tt.wantStatus {
			t.Errorf("%s: status %d; want %d (%s)", tt.name, w.Code, tt.wantStatus, w.Body)
		}
	}
	st, err := q.Admin().Stats(t.Context())
	if err != nil || st.Dead != 1 {
		t.Fatalf("after the refused requests: %+v, %v; want the dead letter still there", st, err)
	}
	r := httptest.NewRequest(http.MethodPost, "/api/deadletters/requeue", strings.NewReader(`{"all":true}`))
	r.Header.Set(csrfHeader, s.csrf)
	r.Header.Set("Origin", "http://127.0.0.1:8080")
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	w := do(s, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"requeued":1`) {
		t.Fatalf("same-origin requeue: %d %s", w.Code, w.Body)
	}
	if st, err := q.Admin().Stats(t.Context()); err != nil || st.Dead != 0 || st.Ready != 1 {
		t.Fatalf("after the requeue: %+v, %v; want 1 ready, 0 dead", st, err)
	}
}

// TestMetricsAPIEndpoint reads /api/stats as KEDA's metrics-api scaler
// does: with a bearer token, a number at a path.
func TestMetricsAPIEndpoint(t *testing.T) {
	t.Parallel()
	q := openQueue(t, 2)
	for _, c := range []string{"echo a", "echo b", "echo c"} {
		if _, err := q.Push(t.Context(), &jobq.Task{Command: c}); err != nil {
			t.Fatal(err)
		}
	}
	s := newServer(t, Config{Queue: q, Addr: "0.0.0.0:9999", Token: "k3da"})
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/api/stats", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer k3da")
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v", res.StatusCode, err)
	}
	if doc["ready"] != float64(3) || doc["dead_lettered"] != float64(2) || doc["size"] != float64(3) {
		t.Errorf("/api/stats = %v; want ready 3, size 3, dead_lettered 2", doc)
	}
}

// TestNoCredentialOnPages checks that no response quotes the password in
// the dead letters' command, reason and output.
func TestNoCredentialOnPages(t *testing.T) {
	t.Parallel()
	q := openQueue(t, 2)
	s := newServer(t, Config{Queue: q})
	for _, path := range []string{"/api/info", "/api/stats", "/api/deadletters", "/api/runtimes", "/api/policies", "/api/series", "/"} {
		w := do(s, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK {
			t.Errorf("%s: status %d", path, w.Code)
		}
		if strings.Contains(w.Body.String(), "hunter2") {
			t.Errorf("%s shows the password: %s", path, w.Body)
		}
	}
	w := do(s, httptest.NewRequest(http.MethodGet, "/api/deadletters", nil))
	var list []deadJSON
	if err := json.Unmarshal(w.Body.Bytes(), &list); err != nil || len(list) != 2 {
		t.Fatalf("dead letters %s: %v", w.Body, err)
	}
	if !strings.Contains(list[0].Detail, "error: refused") || !strings.Contains(list[0].Command, "psql postgres://app:") {
		t.Errorf("dead letter %+v; want the output tail and the command, redacted", list[0])
	}
}

func TestSeriesRates(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{Queue: openQueue(t, 0), History: 3})
	all := driver.KnownCounts{Ready: true, InFlight: true, Delayed: true, Dead: true}
	t0 := time.Unix(1000, 0)
	for i, st := range []driver.Stats{
		{Ready: 100, Known: all},                       // dropped: the history keeps 3
		{Ready: 50, InFlight: 10, Known: all},          // t0+1s
		{Ready: 30, InFlight: 10, Dead: 4, Known: all}, // t0+3s: 20 drained, 4 dead in 2s
		{Ready: 40, InFlight: 10, Dead: 4, Known: driver.KnownCounts{Ready: true, Dead: true}},
	} {
		s.history.add(Sample{At: t0.Add(time.Duration([]int{0, 1, 3, 5}[i]) * time.Second), Stats: st})
	}
	w := do(s, httptest.NewRequest(http.MethodGet, "/api/series", nil))
	var got struct {
		Points []point `json:"points"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Points) != 3 {
		t.Fatalf("%d points; want 3 (the history's capacity)", len(got.Points))
	}
	p0, p1, p2 := got.Points[0], got.Points[1], got.Points[2]
	if p0.T != t0.Add(time.Second).UnixMilli() || p0.Drained != nil || *p0.Ready != 50 {
		t.Errorf("first point %+v; want the second sample, without rates", p0)
	}
	if *p1.Drained != 10 || *p1.DeadRate != 2 {
		t.Errorf("second point drained %v/s, dead %v/s; want 10 and 2", *p1.Drained, *p1.DeadRate)
	}
	if p2.InFlight != nil || p2.Drained != nil || *p2.DeadRate != 0 {
		t.Errorf("third point %+v; want unknown in-flight and drain, dead rate 0", p2)
	}
}

func TestWorkers(t *testing.T) {
	t.Parallel()
	q := openQueue(t, 0)
	now := time.Now()
	list := []Worker{
		{ID: "a", State: "live", Started: now.Add(-2 * time.Hour), Heartbeat: now},
		{ID: "b", State: "vanished", Started: now.Add(-30 * time.Minute), Heartbeat: now.Add(-10 * time.Minute)},
		{ID: "c", State: "withdrawn", Started: now.Add(-50 * time.Minute), Heartbeat: now.Add(-20 * time.Minute)},
	}
	tests := []struct {
		name    string
		source  WorkerSource
		want    string
		wantErr bool
	}{
		{"no registry", nil, `"available":false`, false},
		{"unimplemented", func(context.Context) ([]Worker, error) {
			return nil, &jobq.Error{Code: errcode.Unimplemented, Msg: "no registry"}
		}, `"available":false`, false},
		{"failing", func(context.Context) ([]Worker, error) { return nil, errors.New("boom") }, `"error"`, true},
		{"listed", func(context.Context) ([]Worker, error) { return list, nil },
			`"summary":{"live":1,"vanished":1,"withdrawn":1,"started_last_hour":2,"ended_last_hour":2,"lifetimes":{"count":2,"p50_s":1200,"max_s":1800}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t, Config{Queue: q, Workers: tt.source})
			w := do(s, httptest.NewRequest(http.MethodGet, "/api/workers", nil))
			if (w.Code != http.StatusOK) != tt.wantErr || !strings.Contains(w.Body.String(), tt.want) {
				t.Errorf("status %d, %s; want %q", w.Code, w.Body, tt.want)
			}
		})
	}
}

func TestHistogram(t *testing.T) {
	t.Parallel()
	h := newHistogram([]time.Duration{50 * time.Millisecond, 150 * time.Millisecond, 150 * time.Millisecond, 3 * time.Hour}, "test")
	if h.Count != 4 || h.Buckets[0].Count != 1 || h.Buckets[1].Count != 2 || h.Buckets[len(h.Buckets)-1].Count != 1 || h.Buckets[len(h.Buckets)-1].LeS != nil {
		t.Errorf("histogram %+v", h)
	}
	if *h.P50S != 0.15 || *h.MaxS != 3*3600 {
		t.Errorf("p50 %v, max %v; want 0.15 and 10800", *h.P50S, *h.MaxS)
	}
	if e := newHistogram(nil, "none"); e.Count != 0 || e.P50S != nil {
		t.Errorf("empty histogram %+v", e)
	}
}

// TestAssetsAreSelfContained checks that the page loads nothing from
// another site: no absolute URL in the embedded files but the SVG
// namespace.
func TestAssetsAreSelfContained(t *testing.T) {
	t.Parallel()
	abs := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	err := fs.WalkDir(assets, "static", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(assets, path)
		if err != nil {
			return err
		}
		for _, m := range abs.FindAllString(string(b), -1) {
			if m != "http://www.w3.org" {
				t.Errorf("%s refers to %s", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRing(t *testing.T) {
	t.Parallel()
	r := newRing(3)
	if len(r.all()) != 0 {
		t.Fatal("an empty ring has samples")
	}
	for i := range 5 {
		r.add(Sample{Stats: driver.Stats{Ready: int64(i)}})
	}
	got := r.all()
	if len(got) != 3 || got[0].Stats.Ready != 2 || got[2].Stats.Ready != 4 {
		t.Errorf("ring holds %+v; want the samples 2, 3, 4", got)
	}
}

// TestRuntimesWithoutResultRecords: where the backend keeps no result
// records, the runtimes come from the dead letters and the page says why
// the successes are missing.
func TestRuntimesWithoutResultRecords(t *testing.T) {
	t.Parallel()
	q := openQueue(t, 1)
	if _, err := q.Result(t.Context(), "any"); errcode.Of(err) != errcode.Unimplemented {
		t.Skip("this build's SQLite backend keeps result records; TestRuntimesFromResultRecords covers it")
	}
	s := newServer(t, Config{Queue: q})
	if _, err := q.Push(t.Context(), &jobq.Task{Command: "echo queued"}); err != nil {
		t.Fatal(err)
	}
	s.followResults(t.Context())
	w := do(s, httptest.NewRequest(http.MethodGet, "/api/runtimes", nil))
	var rep struct {
		Outcomes    map[string]int `json:"outcomes"`
		ResultsNote string         `json:"results_note"`
		Source      string         `json:"source"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Outcomes != nil || rep.ResultsNote != "this backend keeps no result records" || !strings.HasPrefix(rep.Source, "0 attempts in the dead letters'") {
		t.Errorf("runtimes %s; want no outcomes and a note saying there are no result records", w.Body)
	}
}

// TestRuntimesFromResultRecords follows a task from the queue to its
// result record, on a backend that keeps them.
func TestRuntimesFromResultRecords(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	url := "sqlite://" + filepath.Join(t.TempDir(), "q.db") + "?queue=results"
	// The dashboard's handle, and a worker's.
	dq, err := jobq.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer dq.Close()
	if _, err := dq.Result(ctx, "any"); errcode.Of(err) == errcode.Unimplemented {
		t.Skip("this build's SQLite backend keeps no result records yet (issue 27); TestRuntimesWithoutResultRecords covers it")
	}
	wq, err := jobq.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Config{Queue: dq})
	for _, c := range []string{"echo ok", "exit 1"} {
		if _, err := wq.Push(ctx, &jobq.Task{Command: c}); err != nil {
			t.Fatal(err)
		}
	}
	s.followResults(ctx)
	for i := range 2 {
		env, err := wq.Receive(ctx, jobq.ReceiveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			err = env.Complete(ctx)
		} else {
			err = env.DeadLetter(ctx, "failed", "")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := wq.Close(); err != nil { // flushes batched settlements
		t.Fatal(err)
	}
	s.followResults(ctx)
	ended, following, off := s.results.snapshot()
	if off != "" || following != 0 || len(ended) != 2 {
		t.Fatalf("followed: %d ended, %d still followed, off %q; want both ended", len(ended), following, off)
	}
	states := map[driver.ResultState]int{}
	for _, e := range ended {
		states[e.state]++
	}
	if states[driver.ResultSucceeded] != 1 || states[driver.ResultDeadLettered] != 1 {
		t.Errorf("outcomes %v; want one succeeded and one dead-lettered", states)
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a longer command", 8, "a longer…"},
		{"héllo", 2, "h…"}, // é is two bytes: the cut moves back to its start
	}
	for _, tt := range tests {
		if got := clip(tt.in, tt.n); got != tt.want {
			t.Errorf("clip(%q, %d) = %q; want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

// TestQueryTokenRedirectsOnce: a correct ?token= on a page gets one 303
// with the cookie and nothing after it: no 401 written over the redirect
// (which net/http logs as a superfluous WriteHeader) and no 401 text in
// the body. Through a real server, whose error log is captured.
func TestQueryTokenRedirectsOnce(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{Queue: openQueue(t, 0), Addr: "0.0.0.0:0", Token: "s3cret"})
	var errLog syncbuf.Buffer
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.Config.ErrorLog = log.New(&errLog, "", 0)
	ts.Start()
	defer ts.Close()
	client := ts.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, path := range []string{"/?token=s3cret", "/?x=1&token=s3cret"} {
		resp, err := client.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("GET %s: status %d; want 303", path, resp.StatusCode)
		}
		if c := resp.Cookies(); len(c) != 1 || c[0].Name != tokenCookie || c[0].Value != "s3cret" {
			t.Errorf("GET %s: cookies %v; want the token cookie", path, c)
		}
		if loc := resp.Header.Get("Location"); strings.Contains(loc, "token") {
			t.Errorf("GET %s: Location %q keeps the token", path, loc)
		}
		if strings.Contains(string(body), "token is required") {
			t.Errorf("GET %s: the 303's body carries the 401 text: %q", path, body)
		}
	}
	ts.Close() // flushes the connections, so that every log line is in
	if strings.Contains(errLog.String(), "superfluous") {
		t.Errorf("the server wrote a second status:\n%s", errLog.String())
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	q := openQueue(t, 0)
	s := newServer(t, Config{Queue: q})
	post := func(path, body string, csrf bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		if csrf {
			r.Header.Set(csrfHeader, s.csrf)
		}
		return do(s, r)
	}
	if w := post("/api/pause", "", false); w.Code != http.StatusForbidden {
		t.Fatalf("pause without the CSRF token: %d %s", w.Code, w.Body)
	}
	if w := post("/api/pause", "kind", true); w.Code != http.StatusBadRequest {
		t.Fatalf("pause with a bad body: %d %s", w.Code, w.Body)
	}
	if pols, err := q.Admin().Policies(t.Context()); err != nil || len(pols) != 0 {
		t.Fatalf("refused pauses stored %v, %v", pols, err)
	}
	if w := post("/api/pause", "", true); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"by":`) {
		t.Fatalf("pause: %d %s", w.Code, w.Body)
	}
	w := do(s, httptest.NewRequest(http.MethodGet, "/api/policies", nil))
	if !strings.Contains(w.Body.String(), `"paused":[{"since":`) {
		t.Fatalf("/api/policies does not list the pause: %s", w.Body)
	}
	if w := post("/api/resume", "{}", true); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"resumed":true`) {
		t.Fatalf("resume: %d %s", w.Code, w.Body)
	}
	w = do(s, httptest.NewRequest(http.MethodGet, "/api/policies", nil))
	if !strings.Contains(w.Body.String(), `"paused":[]`) {
		t.Fatalf("/api/policies lists a pause after resume: %s", w.Body)
	}
}

func TestBulkByFilter(t *testing.T) {
	t.Parallel()
	q := openQueue(t, 3)
	s := newServer(t, Config{Queue: q})
	post := func(path, body string, csrf bool) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		if csrf {
			r.Header.Set(csrfHeader, s.csrf)
		}
		return do(s, r)
	}
	cases := []struct {
		name, path, body string
		csrf             bool
		code             int
		want             string
	}{
		{"no CSRF token", "/api/bulk/requeue", `{"dry_run":true}`, false, http.StatusForbidden, "CSRF"},
		{"unknown action", "/api/bulk/explode", `{}`, true, http.StatusNotFound, "use requeue, cancel or purge"},
		{"bad body", "/api/bulk/requeue", `kind`, true, http.StatusBadRequest, "must be JSON"},
		{"bad since", "/api/bulk/requeue", `{"since":"yesterday"}`, true, http.StatusBadRequest, "neither a duration"},
		{"unknown state", "/api/bulk/purge", `{"state":"zombie","all":true}`, true, http.StatusBadRequest, "unknown state"},
		{"purge without filter", "/api/bulk/purge", `{}`, true, http.StatusBadRequest, "no filter given"},
		{"dry run", "/api/bulk/requeue", `{"error":"refused","since":"1h","dry_run":true}`, true, http.StatusOK, `"matched":3,"done":0`},
		{"no match", "/api/bulk/requeue", `{"exit_code":137,"dry_run":true}`, true, http.StatusOK, `"matched":0`},
	}
	for _, tc := range cases {
		w := post(tc.path, tc.body, tc.csrf)
		if w.Code != tc.code || !strings.Contains(w.Body.String(), tc.want) {
			t.Errorf("%s: %d %s; want %d with %q", tc.name, w.Code, w.Body, tc.code, tc.want)
		}
	}
	if n, err := q.Admin().Size(t.Context()); err != nil || n != 0 {
		t.Fatalf("refused and dry-run bulk actions changed the queue: size %d, %v", n, err)
	}
	w := post("/api/bulk/requeue", `{"error":"refused"}`, true)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"done":3`) {
		t.Fatalf("requeue by filter: %d %s", w.Code, w.Body)
	}
	if n, err := q.Admin().Size(t.Context()); err != nil || n != 3 {
		t.Errorf("after requeuing 3 dead letters the queue holds %d (%v)", n, err)
	}
	w = post("/api/bulk/cancel", `{"all":true}`, true)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"done":3`) {
		t.Errorf("cancel by filter: %d %s", w.Code, w.Body)
	}
}
