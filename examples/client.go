// client.go -- take a dlockd lock (waiting up to 10 s), renew it while
// working, release it: also when the work fails or the process gets Ctrl-C
// or SIGTERM. Go standard library only: go run client.go. DLOCKD_URL picks
// the server, DLOCKD_LOCK the lock.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Grant is the answer to an acquire. The fencing token is an integer
// (tokens stay below 2^53); decoding it into any/float64 would lose digits.
type Grant struct {
	Name         string `json:"name"`
	Owner        string `json:"owner"`
	FencingToken int64  `json:"fencing_token"`
	TTLMs        int64  `json:"ttl_ms"`
	Holds        int64  `json:"holds"`
}

// Refused is an error answer: {"error", "message"}.
type Refused struct {
	Code    string `json:"error"`
	Message string `json:"message"`
}

func (r *Refused) Error() string { return r.Code + ": " + r.Message }

var url = env("DLOCKD_URL", "http://127.0.0.1:8080")

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// call sends body as JSON and decodes a 2xx answer into out. An error
// answer comes back as *Refused; an unreachable dlockd as a one-line error.
func call(ctx context.Context, method, target string, body, out any) error {
	var buf bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&buf).Encode(body); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, target, &buf)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach dlockd at %s: %w", url, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		refused := &Refused{}
		if err := json.NewDecoder(resp.Body).Decode(refused); err != nil {
			return fmt.Errorf("%s %s: status %d", method, target, resp.StatusCode)
		}
		return refused
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func newOwner() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return "report-" + hex.EncodeToString(b)
}

func main() {
	lock := url + "/locks/" + env("DLOCKD_LOCK", "nightly-report")
	// Unique per run: the holder's PUT is granted again (a repeat), so two runs sharing
	// an owner would both "hold" the lock at once.
	owner := newOwner()
	// Ctrl-C and SIGTERM cancel ctx: the wait or the work stops, and the
	// deferred release below still runs.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := work(ctx, lock, owner)
	interrupted := ctx.Err() != nil
	stop()
	switch {
	case interrupted:
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "client.go:", err)
		os.Exit(1)
	}
}

func work(ctx context.Context, lock, owner string) error {
	// From here on the lock may be ours (an interrupted PUT may have been
	// granted), so every way out releases it, with a context of its own.
	defer func() {
		if call(context.Background(), "DELETE", lock+"?owner="+owner, nil, nil) == nil {
			fmt.Println("released")
		}
	}()
	var grant Grant
	err := call(ctx, "PUT", lock, map[string]any{"owner": owner, "ttl_ms": 15000, "wait_ms": 10000}, &grant)
	if err != nil {
		return err
	}
	fmt.Println("acquired, fencing token", grant.FencingToken)
	for step := 1; step <= 3; step++ {
		fmt.Println("working, step", step)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		// renew; a 409 not_held means the lease was lost: stop working
		if err := call(ctx, "POST", lock+"/heartbeat", map[string]any{"owner": owner, "ttl_ms": 15000}, nil); err != nil {
			return err
		}
	}
	fmt.Println("done, releasing")
	return nil
}
