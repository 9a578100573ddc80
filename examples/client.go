// client.go -- take a dlockd lock (waiting up to 10 s), work while the
// library renews its lease, release it: also when the work fails or the
// process gets Ctrl-C or SIGTERM. Uses the client library in clients/go
// (standard library only; go.mod here points module dlockd at it, nothing
// is downloaded): go run client.go. DLOCKD_URL picks the server,
// DLOCKD_LOCK the lock.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"dlockd"
)

func main() {
	lock := "nightly-report"
	if v := os.Getenv("DLOCKD_LOCK"); v != "" {
		lock = v
	}
	c := dlockd.NewClient("") // $DLOCKD_URL, else http://127.0.0.1:8080
	// Ctrl-C and SIGTERM cancel ctx: the wait or the work stops, and
	// WithLock releases on the way out.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	acquired := false
	// the owner id is unique per acquire: two runs never share a holding
	err := c.WithLock(ctx, lock, func(ctx context.Context) error {
		acquired = true
		held, _ := dlockd.FromContext(ctx)
		fmt.Println("acquired, fencing token", held.FencingToken())
		for step := 1; step <= 3; step++ {
			fmt.Println("working, step", step)
			select {
			case <-ctx.Done(): // Ctrl-C, or the lease is lost: stop working
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
		fmt.Println("done, releasing")
		return nil
	}, dlockd.WithTTL(15*time.Second), dlockd.WithWait(10*time.Second))
	interrupted := ctx.Err() != nil
	stop()
	if acquired {
		fmt.Println("released") // WithLock released it on the way out
	}
	var e *dlockd.Error
	switch {
	case interrupted:
		os.Exit(130)
	case errors.As(err, &e) && e.Code == "unreachable":
		fmt.Fprintf(os.Stderr, "client.go: cannot reach dlockd at %s: %v\n", url(), errors.Unwrap(e.Err))
		os.Exit(1)
	case err != nil:
		fmt.Fprintln(os.Stderr, "client.go:", err)
		os.Exit(1)
	}
}

func url() string {
	if v := os.Getenv("DLOCKD_URL"); v != "" {
		return v
	}
	return "http://127.0.0.1:8080"
}
