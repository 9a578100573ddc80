// lock_test.go -- the library's promises, each tried against a real
// dlockd and redis-server (harness_test.go).
package dlockd

import (
	"bufio"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// newClient is NewClient whose answers go to the contract log.
func newClient(url string, opts ...Option) *Client {
	c := NewClient(url, opts...)
	c.http.Transport = recorder{c.http.Transport}
	return c
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// A body that outlives several leases keeps the lock: renewed every
// third of the lease; nothing is renewed after the release.
func TestScopedFormRenewsAndStopsAtRelease(t *testing.T) {
	t.Parallel()
	p := newProxy(t, plainURL)
	c := newClient(p.URL)
	var token int64
	err := c.WithLock(ctxFor(t, 30*time.Second), "go-renew", func(ctx context.Context) error {
		st := state(t, KindLock, "go-renew")
		token = st.Index
		time.Sleep(4 * time.Second) // a lease is 1.2 s
		if ctx.Err() != nil {
			return fmt.Errorf("the body's context ended: %v", ctx.Err())
		}
		if st2 := state(t, KindLock, "go-renew"); !st2.Locked || st2.Index != token {
			return fmt.Errorf("not held by the same holding after 3 leases: %+v", st2)
		}
		return nil
	}, WithTTL(1200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if beats := p.count("POST /locks/go-renew/heartbeat 200"); beats < 5 || beats > 16 {
		t.Errorf("%d heartbeats in 4 s of a 1.2 s lease, want about 10", beats)
	}
	if st := state(t, KindLock, "go-renew"); st.Locked {
		t.Fatalf("still locked after the scoped form: %+v", st)
	}
	time.Sleep(1200 * time.Millisecond) // more than a renewal period
	log := p.entries()
	last := -1
	for i, e := range log {
		if strings.HasPrefix(e, "DELETE") {
			last = i
		}
	}
	if last < 0 || last != len(log)-1 {
		t.Fatalf("requests after the release (or none): %q", log)
	}
}

// Loss is told at once on not_held: here the watch is refused (503), so
// it is the next heartbeat's 409 that tells, within a third of the lease.
func TestLossOnNotHeld(t *testing.T) {
	t.Parallel()
	p := newProxy(t, plainURL)
	p.failWatch.Store(true)
	c := newClient(p.URL)
	l, err := c.Lock(ctxFor(t, 10*time.Second), "go-notheld", WithTTL(1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	forceRelease(t, "/locks/go-notheld")
	within(t, l.Context().Done(), 1500*time.Millisecond, "loss after not_held")
	if l.Held() || !errors.Is(l.Err(), ErrLost) || !strings.Contains(l.Err().Error(), "not_held") {
		t.Fatalf("after not_held: held %v, err %v", l.Held(), l.Err())
	}
	if err := l.Release(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("release of a lost lock: %v", err)
	}
}

// When renewals fail, loss is told before the lease can have ended: by
// its end less the margin, counted from the sending of the last renewal
// dlockd confirmed -- so before that renewal's arrival (here, at the
// proxy) plus the lease, which dlockd's lease outlasts. Lost, it stays
// lost.
func TestLossWhenRenewalsFail(t *testing.T) {
	t.Parallel()
	p := newProxy(t, plainURL)
	c := newClient(p.URL)
	ttl := 3 * time.Second
	l, err := c.Lock(ctxFor(t, 10*time.Second), "go-renewfail", WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond) // a renewal confirmed
	p.dropBeats.Store(true)
	cut := time.Now()
	within(t, l.Context().Done(), 2*ttl, "loss with renewals failing")
	lost := time.Now()
	p.mu.Lock()
	lastBeat := p.lastBeat
	p.mu.Unlock()
	t.Logf("loss told %v after the renewals began to fail, %v before the lease of the last "+
		"renewal (%v) could end", lost.Sub(cut), lastBeat.Add(ttl).Sub(lost), ttl)
	if lastBeat.IsZero() || lost.After(lastBeat.Add(ttl)) {
		t.Errorf("loss told at %v, after the lease of the last renewal (arrived %v) ended",
			lost.Sub(cut), lastBeat.Sub(cut))
	}
	if lost.Before(lastBeat.Add(ttl / 2)) {
		t.Errorf("loss told %v after the last renewal: too early", lost.Sub(lastBeat))
	}
	if l.Held() || !errors.Is(l.Err(), ErrLost) {
		t.Fatalf("after the lease: held %v, err %v", l.Held(), l.Err())
	}
	// dlockd may still have it: the client never says held again
	p.dropBeats.Store(false)
	time.Sleep(900 * time.Millisecond)
	if l.Held() || l.Context().Err() == nil {
		t.Fatal("held again after a loss")
	}
	if n := p.count("POST /locks/go-renewfail/heartbeat 200"); n > 2 {
		t.Errorf("%d renewals passed: some after the cut", n)
	}
	if err := l.Release(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if st := state(t, KindLock, "go-renewfail"); st.Locked {
		t.Fatalf("the release after a loss left it held: %+v", st)
	}
}

// A wait longer than dlockd's --max-wait-ms (3 s here) chains polls.
func TestLongWaitChainsPolls(t *testing.T) {
	t.Parallel()
	holder := newClient(plainURL)
	l, err := holder.Lock(ctxFor(t, 10*time.Second), "go-longwait")
	if err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(6500*time.Millisecond, func() { _ = l.Release(context.Background()) })
	p := newProxy(t, plainURL)
	start := time.Now()
	w, err := newClient(p.URL).Lock(ctxFor(t, 30*time.Second), "go-longwait",
		WithWait(20*time.Second))
	if err != nil {
		t.Fatalf("after %v: %v (%q)", time.Since(start), err, p.entries())
	}
	defer w.Release(context.Background())
	if took := time.Since(start); took < 6*time.Second {
		t.Fatalf("granted after %v, while held", took)
	}
	if n := p.count("PUT /locks/go-longwait 409"); n < 2 {
		t.Fatalf("%d polls ended 409: no chain (%q)", n, p.entries())
	}
}

// A 503 is retried after Retry-After within the deadline: Redis is down
// (dlockd answers 503) and comes back. Its own redis and dlockd, since
// Redis goes away.
func TestUnavailableRetried(t *testing.T) {
	t.Parallel()
	port := freePort()
	if err := startRedis(port); err != nil {
		t.Fatal(err)
	}
	rs := procs[len(procs)-1]
	base, err := startDlockd(port)
	if err != nil {
		t.Fatal(err)
	}
	_ = rs.Process.Kill()
	_ = rs.Wait()
	p := newProxy(t, base)
	// gives up when the retries do not fit
	start := time.Now()
	_, err = newClient(p.URL, WithRetryFor(1500*time.Millisecond)).Lock(ctxFor(t, 20*time.Second),
		"go-503", WithWait(0))
	if !errors.Is(err, ErrUnavailable) || time.Since(start) > 6*time.Second {
		t.Fatalf("redis down: %v after %v", err, time.Since(start))
	}
	time.AfterFunc(2*time.Second, func() {
		if err := startRedis(port); err != nil {
			t.Error(err)
		}
	})
	l, err := newClient(p.URL).Lock(ctxFor(t, 30*time.Second), "go-503", WithWait(20*time.Second))
	if err != nil {
		t.Fatalf("after redis came back: %v (%q)", err, p.entries())
	}
	if p.count("PUT /locks/go-503 503") < 2 {
		t.Errorf("no 503 retried: %q", p.entries())
	}
	if err := l.Release(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// A PUT whose answer was lost is sent again, with the same owner: one
// holding, one hold, freed by one release.
func TestLostAnswerRetried(t *testing.T) {
	t.Parallel()
	p := newProxy(t, plainURL)
	p.dropAnswer.Store(1)
	l, err := newClient(p.URL).Lock(ctxFor(t, 10*time.Second), "go-lostanswer", WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	if n := p.count("PUT /locks/go-lostanswer 200"); n != 2 {
		t.Fatalf("%d PUTs answered 200, want the lost one and its retry: %q", n, p.entries())
	}
	st := state(t, KindLock, "go-lostanswer")
	if len(st.Holders) != 1 || st.Holders[0].Holds != 1 || st.Index != l.FencingToken() {
		t.Fatalf("after a retried PUT: %+v, token %d", st, l.FencingToken())
	}
	if err := l.Release(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if st := state(t, KindLock, "go-lostanswer"); st.Locked {
		t.Fatalf("one release did not free it: %+v", st)
	}
}

// Cancelling a wait gives back its fair-queue place; cancelling while a
// grant is on its way gives back the hold.
func TestCancelGivesBack(t *testing.T) {
	t.Parallel()
	c := newClient(plainURL)
	a, err := c.FairLock(ctxFor(t, 10*time.Second), "go-cancel")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.FairLock(ctx, "go-cancel")
		done <- err
	}()
	for i := 0; state(t, KindFair, "go-cancel").QueueLength != 1; i++ {
		if i > 100 {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || !errors.Is(err, ErrConflict) ||
		err.(*Error).Code != "aborted" {
		t.Fatalf("a cancelled wait: %v", err)
	}
	for i := 0; state(t, KindFair, "go-cancel").QueueLength != 0; i++ {
		if i > 40 {
			t.Fatal("the cancelled waiter kept its place")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := a.Release(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if st := state(t, KindFair, "go-cancel"); st.Locked {
		t.Fatalf("granted to a cancelled waiter: %+v", st)
	}

	p := newProxy(t, plainURL)
	p.delayPUT.Store(int64(3 * time.Second))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel2()
	_, err = newClient(p.URL).Lock(ctx2, "go-cancel-grant")
	if e, ok := err.(*Error); !ok || e.Code != "timeout" || !errors.Is(err, ErrConflict) ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past its context's deadline: %v", err)
	}
	if p.count("PUT /locks/go-cancel-grant 200") != 1 {
		t.Fatalf("the grant was not made: %q", p.entries())
	}
	if st := state(t, KindLock, "go-cancel-grant"); st.Locked {
		t.Fatalf("a grant whose wait was cancelled is still held: %+v", st)
	}
}

// The scoped form releases on every way out: an error, a panic.
func TestScopedFormReleasesOnEveryExit(t *testing.T) {
	t.Parallel()
	c := newClient(plainURL)
	boom := errors.New("boom")
	if err := c.WithLock(ctxFor(t, 10*time.Second), "go-exit", func(context.Context) error {
		return boom
	}); err != boom {
		t.Fatalf("the body's error: %v", err)
	}
	if state(t, KindLock, "go-exit").Locked {
		t.Fatal("held after an error")
	}
	func() {
		defer func() {
			if r := recover(); r != "panic in the body" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_ = c.WithLock(ctxFor(t, 10*time.Second), "go-exit", func(context.Context) error {
			panic("panic in the body")
		})
	}()
	if state(t, KindLock, "go-exit").Locked {
		t.Fatal("held after a panic")
	}
}

// Every kind has the same shape; conflicts and not-held are typed.
func TestKinds(t *testing.T) {
	t.Parallel()
	c := newClient(plainURL)
	ctx := ctxFor(t, 20*time.Second)
	r1, err := c.ReadLock(ctx, "go-rw")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.ReadLock(ctx, "go-rw")
	if err != nil {
		t.Fatal("readers do not share:", err)
	}
	_, err = c.WriteLock(ctx, "go-rw", WithWait(200*time.Millisecond))
	var e *Error
	if !errors.Is(err, ErrConflict) || !errors.As(err, &e) || e.Code != "locked" {
		t.Fatalf("a write while read: %v", err)
	}
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	err = c.WithLock(ctx, "go-rw", func(ctx context.Context) error {
		if st := state(t, KindWrite, "go-rw"); st.Mode != "write" {
			return fmt.Errorf("mode %q", st.Mode)
		}
		return nil
	}, WithKind(KindWrite))
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.FairLock(ctx, "go-fair", WithTTL(5*time.Second))
	if err != nil || f.FencingToken() <= 0 || f.TTL() != 5*time.Second {
		t.Fatalf("fair: %v", err)
	}
	_ = f.Release(ctx)
	r1, _ = c.ReadLock(ctx, "go-rw")
	_, err = c.Lock(ctx, "go-rw")
	if !errors.As(err, &e) || e.Code != "wrong_kind" {
		t.Fatalf("a plain lock on a read-write lock's name: %v", err)
	}
	_ = r1.Release(ctx)
	// a release of what is not held
	l, _ := c.Lock(ctx, "go-nothold")
	forceRelease(t, "/locks/go-nothold")
	<-l.Context().Done()
	l2, _ := c.Lock(ctx, "go-nothold2", WithOwner("go-fixed-owner"))
	forceRelease(t, "/locks/go-nothold2")
	time.Sleep(100 * time.Millisecond)
	l2.stop() // as if no loss had been seen
	l2.wg.Wait()
	l2.mu.Lock()
	l2.held, l2.lost = true, nil
	l2.mu.Unlock()
	if err := l2.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("release of a freed lock: %v", err)
	}
}

// A force release by an admin fires the loss signal within a second;
// HTTPS with a private CA and mutual TLS, and bearer tokens.
func TestForceReleaseAuthTLS(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 20*time.Second)
	c := newClient(secureURL, WithTLS(clientTLS), WithToken(clientToken))
	l, err := c.Lock(ctx, "go-forced", WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the watch is on
	admin := &http.Client{Transport: &http.Transport{TLSClientConfig: clientTLS}}
	req, _ := http.NewRequest("DELETE", secureURL+"/locks/go-forced?force=true", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := admin.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("force release: %v %v", err, res)
	}
	res.Body.Close()
	took := within(t, l.Context().Done(), time.Second, "loss after a force release")
	t.Logf("loss told %v after the force release", took)
	if l.Held() || !errors.Is(l.Err(), ErrLost) {
		t.Fatal("still held")
	}
	_ = l.Release(ctx)

	_, err = newClient(secureURL, WithTLS(clientTLS)).Lock(ctx, "go-forced")
	if !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("no token: %v", err)
	}
	_, err = c.Lock(ctx, "billing-x")
	var e *Error
	if !errors.As(err, &e) || e.Code != "forbidden" || !errors.Is(err, ErrUnauthorized) {
		t.Fatalf("outside the token's prefix: %v", err)
	}
	noCert := newClient(secureURL, WithToken(clientToken), WithRetryFor(0),
		WithTLS(clientTLS.Clone()))
	noCert.http.Transport.(recorder).next.(*http.Transport).TLSClientConfig.Certificates = nil
	if _, err := noCert.Lock(ctx, "go-forced", WithWait(0)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("no client certificate: %v", err)
	}
	start := time.Now()
	_, err = newClient(secureURL, WithToken(clientToken)).Lock(ctx, "go-forced", WithWait(0))
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) || time.Since(start) > 2*time.Second {
		t.Fatalf("an unknown CA: %v, after %v (it is not retried)", err, time.Since(start))
	}
}

// Three processes contending on one name never overlap: each logs the
// start and end of its holdings to one file; starts and ends must
// alternate, each end its start's, and tokens increase.
func TestThreeProcessesNeverOverlap(t *testing.T) {
	t.Parallel()
	logPath := filepath.Join(t.TempDir(), "holds.log")
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "DLOCKD_GO_HELPER=go-contend", "DLOCKD_GO_LOG="+logPath,
			"DLOCKD_URL="+plainURL)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("%v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var open string
	var lastToken int64
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text()) // start|end pid token
		token, _ := strconv.ParseInt(fields[2], 10, 64)
		switch fields[0] {
		case "start":
			if open != "" {
				t.Fatalf("line %d: %q starts while %q holds", n+1, sc.Text(), open)
			}
			if token <= lastToken {
				t.Fatalf("line %d: token %d after %d", n+1, token, lastToken)
			}
			open, lastToken = fields[1]+" "+fields[2], token
		case "end":
			if open != fields[1]+" "+fields[2] {
				t.Fatalf("line %d: %q ends while %q holds", n+1, sc.Text(), open)
			}
			open = ""
		}
		n++
	}
	if n != 3*2*helperRounds {
		t.Fatalf("%d lines, want %d", n, 3*2*helperRounds)
	}
}

const helperRounds = 12

// helperProcess is one of the contending processes.
func helperProcess() int {
	c := newClient("")
	name, logPath := os.Getenv("DLOCKD_GO_HELPER"), os.Getenv("DLOCKD_GO_LOG")
	for i := 0; i < helperRounds; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		err := c.WithLock(ctx, name, func(ctx context.Context) error {
			l, _ := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0644)
			defer l.Close()
			held, _ := FromContext(ctx)
			fmt.Fprintf(l, "start %d %d\n", os.Getpid(), held.FencingToken())
			time.Sleep(15 * time.Millisecond)
			fmt.Fprintf(l, "end %d %d\n", os.Getpid(), held.FencingToken())
			return nil
		}, WithTTL(5*time.Second))
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// NewClient("") takes dlockd's URL from $DLOCKD_URL and the token from
// $DLOCKD_TOKEN.
func TestEnvironmentDefaults(t *testing.T) {
	t.Setenv("DLOCKD_URL", secureURL)
	t.Setenv("DLOCKD_TOKEN", clientToken)
	c := NewClient("", WithTLS(clientTLS))
	c.http.Transport = recorder{c.http.Transport}
	ctx := ctxFor(t, 10*time.Second)
	l, err := c.Lock(ctx, "go-env")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if c := NewClient("", WithToken("")); c.token != "" || c.url != secureURL {
		t.Fatalf("WithToken(\"\") and $DLOCKD_URL: %q %q", c.token, c.url)
	}
	os.Unsetenv("DLOCKD_URL")
	if c := NewClient(""); c.url != DefaultURL {
		t.Fatalf("no $DLOCKD_URL: %q", c.url)
	}
}

// A body that returns its context's error after a loss gets an error
// that matches ErrLost: the cancel was the loss's (a probe saw
// context.Canceled alone, so a lost lease looked like the caller's own
// cancel).
func TestWithLockSaysLostWhenTheBodyReturnsTheLossesCancel(t *testing.T) {
	t.Parallel()
	c := newClient(plainURL)
	err := c.WithLock(ctxFor(t, 20*time.Second), "go-lostcancel", func(ctx context.Context) error {
		forceRelease(t, "/locks/go-lostcancel")
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			return errors.New("the body's context was not cancelled by the loss")
		}
		return ctx.Err()
	})
	if !errors.Is(err, ErrLost) {
		t.Fatalf("WithLock after a loss, the body returning ctx.Err(): %v, want ErrLost", err)
	}
}

// Held reads the clock: a process paused past its lease (its renewer not
// run yet) sees false at once, and the loss is told as any other. Here
// the lease this clock vouches for is moved into the past, as a pause
// would leave it; the scoped form then ends with ErrLost, not nil.
func TestHeldReadsTheClock(t *testing.T) {
	t.Parallel()
	c := newClient(plainURL)
	runOut := func(l *Lock) {
		l.mu.Lock()
		l.end = time.Now().Add(-time.Millisecond)
		l.mu.Unlock()
	}
	l, err := c.Lock(ctxFor(t, 10*time.Second), "go-clock", WithTTL(15*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	runOut(l)
	if l.Held() || !errors.Is(l.Err(), ErrLost) {
		t.Fatalf("a lease run out by the clock: held %v, err %v", l.Held(), l.Err())
	}
	within(t, l.Context().Done(), time.Second, "the context of a lease run out")
	if err := l.Release(ctxFor(t, 5*time.Second)); err != nil {
		t.Fatalf("release: %v", err)
	}
	err = c.WithLock(ctxFor(t, 10*time.Second), "go-clock", func(ctx context.Context) error {
		l, _ := FromContext(ctx)
		runOut(l)
		return nil
	}, WithTTL(15*time.Second))
	if !errors.Is(err, ErrLost) {
		t.Fatalf("a body that ended after its lease ran out: %v, want ErrLost", err)
	}
	if st := state(t, KindLock, "go-clock"); st.Locked {
		t.Fatalf("still locked after the scoped form: %+v", st)
	}
}
