// example_test.go -- the examples of README.md, run by go test against
// the test dlockd ($DLOCKD_URL, set by harness_test.go); readme_test.go
// checks that every Go block of the README is here, as shown.
package dlockd_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"dlockd"
)

func makeReport(ctx context.Context) error {
	select {
	case <-time.After(50 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func Example() {
	c := dlockd.NewClient("") // $DLOCKD_URL, else http://127.0.0.1:8080; token: $DLOCKD_TOKEN
	err := c.WithLock(context.Background(), "nightly-report", func(ctx context.Context) error {
		held, _ := dlockd.FromContext(ctx)
		fmt.Println("holding nightly-report:", held.FencingToken() > 0)
		return makeReport(ctx) // ctx is cancelled the moment the lease is lost
	}, dlockd.WithTTL(15*time.Second), dlockd.WithWait(30*time.Second))
	if err != nil {
		log.Fatal(err) // fn's error, an ErrConflict (not acquired in 30 s), or an ErrLost
	}
	// Output: holding nightly-report: true
}

func Example_explicit() {
	c := dlockd.NewClient("")
	ctx := context.Background()
	l, err := c.Lock(ctx, "nightly-report", dlockd.WithWait(0))
	if errors.Is(err, dlockd.ErrConflict) {
		log.Fatal("someone else holds it")
	} else if err != nil {
		log.Fatal(err)
	}
	defer l.Release(context.Background())
	select {
	case <-time.After(100 * time.Millisecond): // the work
		fmt.Println("done, still held:", l.Held())
	case <-l.Context().Done(): // the lease is lost: stop at once
		fmt.Println("lost:", l.Err())
	}
	// Output: done, still held: true
}

// lead holds the lock "leader" until the lease is lost or ctx ends, and
// campaigns again after a loss.
func lead(ctx context.Context, c *dlockd.Client, me string) {
	for ctx.Err() == nil {
		l, err := c.Lock(ctx, "leader", dlockd.WithOwner(me), dlockd.WithTTL(10*time.Second))
		if err != nil {
			continue // ctx ended, or dlockd was unreachable for 10 s: try again
		}
		// ... lead, passing l.FencingToken() to what is led, until:
		select {
		case <-l.Context().Done(): // lost: someone else may lead now
		case <-ctx.Done():
		}
		l.Release(context.Background())
	}
}

// follow prints who leads each time it changes, until ctx ends.
func follow(ctx context.Context, c *dlockd.Client) {
	st, err := c.Status(ctx, dlockd.KindLock, "leader")
	for err == nil {
		fmt.Printf("leader: %q\n", st.Leader())
		st, err = c.Watch(ctx, dlockd.KindLock, "leader", st.Index) // a long poll
	}
}

func Example_leaderElection() {
	c := dlockd.NewClient("")
	ctx, stop := context.WithCancel(context.Background())
	followed := make(chan struct{})
	go func() { follow(ctx, c); close(followed) }()
	time.Sleep(time.Second) // the follower has read the state
	ctxA, stopA := context.WithCancel(ctx)
	ledA := make(chan struct{})
	go func() { lead(ctxA, c, "node-a"); close(ledA) }()
	waitLeader(c, "node-a")
	time.Sleep(time.Second)
	stopA() // node-a steps down
	<-ledA
	time.Sleep(time.Second)
	go lead(ctx, c, "node-b")
	waitLeader(c, "node-b")
	time.Sleep(time.Second)
	stop()
	<-followed
	// Output:
	// leader: ""
	// leader: "node-a"
	// leader: ""
	// leader: "node-b"
}

func waitLeader(c *dlockd.Client, who string) {
	for i := 0; i < 200; i++ {
		if st, err := c.Status(context.Background(), dlockd.KindLock, "leader"); err == nil &&
			st.Leader() == who {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func Example_semaphore() {
	c := dlockd.NewClient("")
	ctx := context.Background()
	// at most 2 deploys at once: each takes one of the semaphore's 2 permits
	l, err := c.Semaphore(ctx, "deploys", 2, dlockd.WithWait(time.Minute))
	var e *dlockd.Error
	if errors.As(err, &e) && errors.Is(err, dlockd.ErrLimitMismatch) {
		log.Fatalf("deploys has %d permits, not 2", e.Limit)
	} else if err != nil {
		log.Fatal(err) // an ErrConflict: no permit came back within the minute
	}
	defer l.Release(context.Background())
	st, _ := c.Status(ctx, dlockd.KindSemaphore, "deploys")
	fmt.Printf("deploying with a permit of %d; %d free\n", st.Limit, st.Available)
	// Output: deploying with a permit of 2; 1 free
}

func Example_session() {
	c := dlockd.NewClient("")
	err := c.WithSession(context.Background(), 10*time.Second, func(ctx context.Context, s *dlockd.Session) error {
		// both or neither, waiting up to 30 s for both at once
		ls, err := s.LockAll(ctx, 30*time.Second,
			dlockd.LockSpec{Kind: dlockd.KindLock, Name: "accounts"},
			dlockd.LockSpec{Kind: dlockd.KindWrite, Name: "ledger"})
		if err != nil {
			return err // an ErrConflict whose Lock names the one in the way; none is held
		}
		fmt.Println("tokens:", ls[0].FencingToken() > 0, ls[1].FencingToken() > 0)
		// one more for the session, on its own
		if _, err := s.Lock(ctx, "invoices", dlockd.WithKind(dlockd.KindRead)); err != nil {
			return err
		}
		hs, _ := s.Holdings(ctx)
		fmt.Println("holdings:", len(hs))
		return makeReport(ctx) // ctx is cancelled the moment the session is lost
	}, dlockd.WithSessionName("billing-worker"))
	if err != nil {
		log.Fatal(err) // fn's error, or an ErrLost
	}
	// Output:
	// tokens: true true
	// holdings: 3
}
