// session_test.go -- sessions against a real dlockd (harness_test.go):
// holdings kept by the session's heartbeat alone, released at once by
// Close, loss told when the session is ended from outside, and LockAll
// all or none.
package dlockd

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// Two holdings (a lock and a read lock) outlive 3 leases of their session
// by its heartbeat alone, one heartbeat per third of the lease for both;
// Close releases both, and another client takes the lock at once.
func TestSessionKeepsHoldingsAndCloseReleases(t *testing.T) {
	t.Parallel()
	p := newProxy(t, plainURL)
	c := newClient(p.URL)
	ctx := ctxFor(t, 30*time.Second)
	s, err := c.NewSession(ctx, time.Second, WithSessionName("go-test"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Lock(ctx, "go-sess-a", WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Lock(ctx, "go-sess-b", WithKind(KindRead), WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3300 * time.Millisecond)
	if !a.Held() || !b.Held() || s.Err() != nil || s.Context().Err() != nil {
		t.Fatalf("after 3 leases: held %v %v, session %v", a.Held(), b.Held(), s.Err())
	}
	if st := state(t, KindLock, "go-sess-a"); !st.Locked || st.Index != a.FencingToken() {
		t.Fatalf("go-sess-a after 3 leases: %+v, want token %d", st, a.FencingToken())
	}
	if st := state(t, KindRead, "go-sess-b"); st.Mode != "read" {
		t.Fatalf("go-sess-b after 3 leases: %+v", st)
	}
	hs, err := s.Holdings(ctx)
	if err != nil || len(hs) != 2 {
		t.Fatalf("holdings: %+v, %v", hs, err)
	}
	for _, h := range hs {
		if h.Kind != KindLock && h.Kind != KindRead || h.FencingToken == 0 {
			t.Errorf("holding %+v", h)
		}
	}
	if n := p.count("POST /locks/"); n != 0 {
		t.Errorf("%d heartbeats of single locks: the session renews them", n)
	}
	if n := p.count("POST /sessions/" + s.ID() + "/heartbeat 200"); n < 6 || n > 14 {
		t.Errorf("%d session heartbeats in 3.3 s of a 1 s lease, want about 10", n)
	}
	other := newClient(plainURL)
	if _, err := other.Lock(ctx, "go-sess-a", WithWait(0)); !errors.Is(err, ErrConflict) {
		t.Fatalf("another client took a session's lock: %v", err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if a.Held() || a.Context().Err() == nil || s.Context().Err() == nil || s.Err() != nil {
		t.Fatalf("after Close: held %v, session err %v", a.Held(), s.Err())
	}
	start := time.Now()
	l, err := other.Lock(ctx, "go-sess-a", WithWait(0))
	if err != nil {
		t.Fatalf("the lock is not free at once after Close: %v", err)
	}
	t.Logf("taken by another client %v after Close", time.Since(start))
	l.Release(ctx)
	if _, err := s.Holdings(ctx); !errors.Is(err, ErrSessionEnded) {
		t.Fatalf("holdings of a closed session: %v", err)
	}
}

// A session ended from outside (DELETE by another call) is told lost at
// its next heartbeat: its Context and its holdings' within a lease.
func TestSessionEndedFromOutsideIsLost(t *testing.T) {
	t.Parallel()
	c := newClient(plainURL)
	ctx := ctxFor(t, 30*time.Second)
	var held *Lock
	var ended time.Time
	err := c.WithSession(ctx, 1500*time.Millisecond, func(ctx context.Context, s *Session) error {
		var err error
		if held, err = s.Lock(ctx, "go-sess-outside", WithKind(KindFair), WithWait(0)); err != nil {
			return err
		}
		req, _ := http.NewRequest("DELETE", plainURL+"/sessions/"+s.ID(), nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("DELETE from outside: %d", res.StatusCode)
		}
		ended = time.Now()
		within(t, ctx.Done(), 3*time.Second, "the body's context after the session ended")
		return nil
	})
	if !errors.Is(err, ErrLost) || !errors.Is(held.Err(), ErrLost) || held.Held() {
		t.Fatalf("WithSession: %v; holding %v (held %v)", err, held.Err(), held.Held())
	}
	t.Logf("lost %v after the DELETE: %v", time.Since(ended), err)
}

// LockAll takes all or none: with one name held elsewhere it is refused
// naming that one, holding nothing; granted once the blocker releases,
// with a fencing token each. A holding released alone is no loss.
func TestSessionLockAllOrNone(t *testing.T) {
	t.Parallel()
	c := newClient(plainURL)
	ctx := ctxFor(t, 30*time.Second)
	blocker, err := c.Lock(ctx, "go-multi-b", WithTTL(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.NewSession(ctx, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	specs := []LockSpec{{KindLock, "go-multi-a", 0}, {KindLock, "go-multi-b", 0},
		{KindSemaphore, "go-multi-c", 2}}
	start := time.Now()
	_, err = s.LockAll(ctx, 500*time.Millisecond, specs...)
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrConflict) || e.Lock == nil ||
		*e.Lock != (LockSpec{Kind: KindLock, Name: "go-multi-b"}) {
		t.Fatalf("LockAll with a blocker: %v (%+v)", err, e)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Errorf("refused after %v, before its wait", d)
	}
	if st := state(t, KindLock, "go-multi-a"); st.Locked {
		t.Fatalf("go-multi-a held after a refused LockAll: %+v", st)
	}
	if hs, err := s.Holdings(ctx); err != nil || len(hs) != 0 {
		t.Fatalf("holdings after a refused LockAll: %+v, %v", hs, err)
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		blocker.Release(context.Background())
	}()
	ls, err := s.LockAll(ctx, 10*time.Second, specs...) // past --max-wait-ms 3000 if need be
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range ls {
		if l.Name() != specs[i].Name || l.FencingToken() == 0 || !l.Held() {
			t.Errorf("holding %d: %s token %d held %v", i, l.Name(), l.FencingToken(), l.Held())
		}
	}
	if st := state(t, KindLock, "go-multi-b"); st.Index != ls[1].FencingToken() {
		t.Fatalf("go-multi-b: %+v, want token %d", st, ls[1].FencingToken())
	}
	if err := ls[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // heartbeats drop it
	if s.Err() != nil || !ls[1].Held() {
		t.Fatalf("a holding released alone lost the session: %v", s.Err())
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := state(t, KindSemaphore, "go-multi-c"); st.Held != 0 {
		t.Fatalf("go-multi-c after Close: %+v", st)
	}
}

// A holding forced free from outside is dropped by the next heartbeat:
// the session is lost, and with it every holding; when heartbeats stop
// getting through, it is lost before its lease can end.
func TestSessionLostOnDropAndOnFailedHeartbeats(t *testing.T) {
	t.Parallel()
	p := newProxy(t, plainURL)
	c := newClient(p.URL)
	ctx := ctxFor(t, 30*time.Second)
	s, err := c.NewSession(ctx, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.Lock(ctx, "go-sess-drop-a", WithWait(0))
	b, err := s.Lock(ctx, "go-sess-drop-b", WithKind(KindWrite), WithWait(0))
	if err != nil || a == nil {
		t.Fatal(err)
	}
	forceRelease(t, "/locks/go-sess-drop-a")
	within(t, s.Context().Done(), 3*time.Second, "the session's loss after a forced release")
	if !errors.Is(s.Err(), ErrLost) || b.Held() || b.Context().Err() == nil {
		t.Fatalf("after the drop: session %v, go-sess-drop-b held %v", s.Err(), b.Held())
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := state(t, KindWrite, "go-sess-drop-b"); st.Mode != "none" {
		t.Fatalf("go-sess-drop-b after Close of the lost session: %+v", st)
	}

	s, err = c.NewSession(ctx, 1500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	p.dropBeats.Store(true)
	start := time.Now()
	within(t, s.Context().Done(), 3*time.Second, "the loss when no heartbeat gets through")
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("lost %v after heartbeats stopped, past the 1.5 s lease", d)
	}
	if !errors.Is(s.Err(), ErrLost) {
		t.Fatalf("session: %v", s.Err())
	}
	t.Logf("lost %v after heartbeats stopped: %v", time.Since(start), s.Err())
}

// A wait for the session cut short by its context gives back what may
// have been granted meanwhile; the heartbeat that drops it is no loss.
func TestSessionCancelledWaitGivenBackIsNoLoss(t *testing.T) {
	t.Parallel()
	p := newProxy(t, plainURL)
	c := newClient(p.URL)
	ctx := ctxFor(t, 30*time.Second)
	s, err := c.NewSession(ctx, 1200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	p.delayPUT.Store(int64(time.Second)) // granted, answered after ctx ends
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err = s.Lock(short, "go-sess-cut")
	cancel()
	p.delayPUT.Store(0)
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("a wait cut short: %v", err)
	}
	if st := state(t, KindLock, "go-sess-cut"); st.Locked {
		t.Fatalf("go-sess-cut held after the wait was cut short: %+v", st)
	}
	time.Sleep(1500 * time.Millisecond) // heartbeats drop the given-back holding
	if err := s.Err(); err != nil {
		t.Fatalf("the session was lost by a holding it gave back: %v", err)
	}
	if n := p.count("POST /sessions/" + s.ID() + "/heartbeat 200"); n < 2 {
		t.Fatalf("%d heartbeats", n)
	}
}

// A holding taken through a session reads the clock in Held() as a lock
// of its own does: a process paused past the session's lease (its
// heartbeat goroutine not run yet) sees false at once, and the session and
// its holdings are lost. Found by a probe: Held() said true until the
// heartbeat goroutine ran, since a session's holding has no lease end of
// its own. Here the session's end is moved into the past, as a pause
// would leave it.
func TestSessionHoldingHeldReadsTheClock(t *testing.T) {
	t.Parallel()
	c := newClient(plainURL)
	ctx := ctxFor(t, 10*time.Second)
	s, err := c.NewSession(ctx, 15*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctxFor(t, 5*time.Second))
	l, err := s.Lock(ctx, "go-sess-clock", WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	if !l.Held() {
		t.Fatal("not held once granted")
	}
	s.mu.Lock()
	s.end = time.Now().Add(-time.Millisecond)
	s.mu.Unlock()
	if l.Held() || !errors.Is(l.Err(), ErrLost) || !errors.Is(s.Err(), ErrLost) {
		t.Fatalf("a session run out by the clock: held %v, err %v, session %v", l.Held(),
			l.Err(), s.Err())
	}
	within(t, l.Context().Done(), time.Second, "the holding's context")
	within(t, s.Context().Done(), time.Second, "the session's context")
}
