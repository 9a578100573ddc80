// semaphore_test.go -- semaphores (KindSemaphore) against the real
// dlockd: never more holders than the limit, the limit in force named
// on a mismatch, loss told at once on a force release.
package dlockd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// N+2 contenders on a semaphore of N permits: never more than N inside
// at once (counted here and in dlockd's state), and all of them get in.
func TestSemaphoreAtMostLimitHolders(t *testing.T) {
	t.Parallel()
	const limit = 3
	const contenders, rounds = limit + 2, 3
	ctx := ctxFor(t, 60*time.Second)
	c := newClient(plainURL)
	var inside, most, done atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, contenders*rounds)
	for i := 0; i < contenders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				err := c.WithLock(ctx, "go-sem-limit", func(ctx context.Context) error {
					n := inside.Add(1)
					defer inside.Add(-1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					if st, err := c.Status(ctx, KindSemaphore, "go-sem-limit"); err != nil {
						return err
					} else if st.Held > limit || st.Limit != limit {
						return errors.New("dlockd shows more permits out than the limit")
					}
					time.Sleep(150 * time.Millisecond)
					done.Add(1)
					return nil
				}, WithKind(KindSemaphore), WithLimit(limit), WithTTL(5*time.Second))
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if most.Load() > limit || done.Load() != contenders*rounds {
		t.Fatalf("at most %d inside at once (limit %d); %d of %d done", most.Load(), limit,
			done.Load(), contenders*rounds)
	}
	t.Logf("at most %d of %d contenders inside at once (limit %d)", most.Load(), contenders, limit)
	if st := state(t, KindSemaphore, "go-sem-limit"); st.Held != 0 || st.Available != limit {
		t.Fatalf("after every release: %+v", st)
	}
}

// Another limit than the one in force: an error matching
// ErrLimitMismatch carrying that limit, and nothing changed; at the
// limit a wait of 0 is ErrConflict.
func TestSemaphoreLimitMismatch(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 20*time.Second)
	c := newClient(plainURL)
	l, err := c.Semaphore(ctx, "go-sem-mismatch", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.FencingToken() <= 0 || !l.Held() {
		t.Fatalf("held %v token %d", l.Held(), l.FencingToken())
	}
	_, err = c.Semaphore(ctx, "go-sem-mismatch", 5, WithWait(0))
	var e *Error
	if !errors.Is(err, ErrLimitMismatch) || !errors.As(err, &e) || e.Limit != 1 || e.Status != 409 {
		t.Fatalf("another limit: %v", err)
	}
	if errors.Is(err, ErrConflict) {
		t.Fatalf("a limit mismatch is no conflict: %v", err)
	}
	if _, err := c.Semaphore(ctx, "go-sem-mismatch", 1, WithWait(0)); !errors.Is(err, ErrConflict) {
		t.Fatalf("at the limit: %v", err)
	}
	if st := state(t, KindSemaphore, "go-sem-mismatch"); st.Limit != 1 || st.Held != 1 {
		t.Fatalf("after the mismatch: %+v", st)
	}
	if _, err := c.Lock(ctx, "go-sem-x", WithKind(KindSemaphore)); err == nil {
		t.Fatal("a semaphore without a limit was asked for")
	}
	if _, err := c.Lock(ctx, "go-sem-x", WithLimit(2)); err == nil {
		t.Fatal("a lock with a limit was asked for")
	}
}

// A force release of the semaphore ends every holding: each holder's
// Context is cancelled within a round trip (the watch, asked by owner),
// and Err matches ErrLost.
func TestSemaphoreLossOnForceRelease(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 20*time.Second)
	c := newClient(plainURL)
	a, err := c.Semaphore(ctx, "go-sem-forced", 2, WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Semaphore(ctx, "go-sem-forced", 2, WithTTL(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // both watch, and see themselves held
	if !a.Held() || !b.Held() {
		t.Fatalf("lost before the force release: %v %v", a.Err(), b.Err())
	}
	forceRelease(t, "/semaphores/go-sem-forced")
	took := within(t, a.Context().Done(), 1500*time.Millisecond, "loss after a force release")
	within(t, b.Context().Done(), 1500*time.Millisecond, "the other holder's loss")
	t.Logf("loss told %v after the force release", took)
	for _, l := range []*Lock{a, b} {
		if l.Held() || !errors.Is(l.Err(), ErrLost) {
			t.Fatalf("after the force release: held %v, err %v", l.Held(), l.Err())
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release of a lost permit: %v", err)
		}
	}
}

// A semaphore's state lists its first 100 holders by lease end: a holder
// past them (here the 101st, its lease the longest) is still seen held,
// since the watch asks by owner; and still sees its loss.
func TestSemaphoreHolderPastTheFirst100(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t, 30*time.Second)
	for i := 0; i < 100; i++ {
		u := fmt.Sprintf("%s/semaphores/go-sem-101?owner=go-other-%d&limit=101&ttl_ms=20000", plainURL, i)
		req, _ := http.NewRequestWithContext(ctx, "PUT", u, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("permit %d: %d", i, res.StatusCode)
		}
	}
	l, err := newClient(plainURL).Semaphore(ctx, "go-sem-101", 101, WithTTL(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if st := state(t, KindSemaphore, "go-sem-101"); st.holds(l.Owner(), "") || st.Held != 101 {
		t.Fatalf("the holders listed: %d of %d, this one among them", len(st.Holders), st.Held)
	}
	time.Sleep(time.Second) // the watch has read the state
	if !l.Held() {
		t.Fatalf("lost while held: %v", l.Err())
	}
	forceRelease(t, "/semaphores/go-sem-101")
	within(t, l.Context().Done(), 1500*time.Millisecond, "loss after a force release")
}
