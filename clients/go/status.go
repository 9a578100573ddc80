// status.go -- a lock's state (GET) and watching it change (GET with
// index and wait_ms, a long poll dlockd wakes by pub/sub): what a
// follower in a leader election waits on, and what tells a holder at
// once that its holding was taken away.
package dlockd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// Holder is one holding in a lock's state.
type Holder struct {
	Owner        string `json:"owner"` // hidden from other tokens' callers
	Holds        int    `json:"holds"`
	FencingToken int64  `json:"fencing_token"`
	TTLMs        int64  `json:"ttl_ms"`
	Side         string `json:"side"`  // "read" or "write" on a read-write lock
	Value        string `json:"value"` // the holding's value, if any
}

// Status is a lock's state as dlockd answers GET.
type Status struct {
	Name    string `json:"name"`
	Locked  bool   `json:"locked"`
	TTLMs   int64  `json:"ttl_ms"`
	Index   int64  `json:"index"` // the holding's token; 0 when free
	Changed bool   `json:"changed"`
	Mode    string `json:"mode"` // read-write locks: none, read, write
	// fair locks: how many wait in the queue
	QueueLength int      `json:"queue_length"`
	Holders     []Holder `json:"holders"`
	// semaphores: the permits in all (0: no semaphore), free now, out,
	// and how many acquires wait for one
	Limit     int `json:"limit"`
	Available int `json:"available"`
	Held      int `json:"held"`
	Waiting   int `json:"waiting"`
	// asked by owner (semaphores): whether that owner holds a permit
	HeldByOwner *bool `json:"held_by_owner"`
}

// Leader is the first holder's owner id ("" when free).
func (s *Status) Leader() string {
	if len(s.Holders) == 0 {
		return ""
	}
	return s.Holders[0].Owner
}

func (s *Status) holds(owner, side string) bool {
	if s.HeldByOwner != nil && *s.HeldByOwner {
		return true
	}
	for _, h := range s.Holders {
		if h.Owner == owner && (side == "" || h.Side == side) {
			return true
		}
	}
	// asked by owner, past the holders listed (a semaphore's first 100):
	// dlockd's held_by_owner is false there too, so nothing is known; the
	// renewal tells a loss then
	return s.HeldByOwner != nil && len(s.Holders) < s.Held
}

// Status reads the state of the lock name of kind k (KindRead and
// KindWrite both read the read-write lock; KindSemaphore a semaphore).
func (c *Client) Status(ctx context.Context, k Kind, name string) (*Status, error) {
	a, err := c.call(ctx, "GET", fmt.Sprintf(k.spec().status, url.PathEscape(name)), nil, nil)
	if err != nil {
		return nil, &Error{Code: "unreachable", Err: err}
	}
	return decodeStatus(a)
}

// Watch waits until the state's index differs from index (someone took
// the lock, released it, or its lease ended) and returns the new state,
// chaining long polls as needed; at ctx's end it returns ctx's error.
// Pass the Index of the last Status to wait for the next change.
func (c *Client) Watch(ctx context.Context, k Kind, name string, index int64) (*Status, error) {
	path := fmt.Sprintf(k.spec().status, url.PathEscape(name))
	for {
		left := maxPoll
		if d, ok := ctx.Deadline(); ok && time.Until(d) < left {
			left = time.Until(d)
		}
		st, err := c.watchPath(ctx, path, "", index, left)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			e, _ := err.(*Error)
			if e == nil || !e.Is(ErrUnavailable) {
				return nil, err
			}
			retry := e.RetryAfter
			if retry <= 0 {
				retry = time.Second
			}
			if !pause(ctx, retry) {
				return nil, ctx.Err()
			}
			continue
		}
		if st.Index != index {
			return st, nil
		}
	}
}

// watchPath is one long poll of at most max; asked by owner unless "".
func (c *Client) watchPath(ctx context.Context, path, owner string, index int64,
	max time.Duration) (*Status, error) {
	for {
		waitMs := c.pollFor(max)
		q := url.Values{"index": {strconv.FormatInt(index, 10)},
			"wait_ms": {strconv.FormatInt(waitMs, 10)}}
		if owner != "" {
			q.Set("owner", owner)
		}
		rctx, cancel := context.WithTimeout(ctx, time.Duration(waitMs)*time.Millisecond+slack)
		a, err := c.call(rctx, "GET", path, q, nil)
		cancel()
		if err != nil {
			return nil, &Error{Code: "unreachable", Err: err}
		}
		st, err := decodeStatus(a)
		if e, ok := err.(*Error); ok && c.learnPoll(e, waitMs) {
			continue
		}
		if err == nil && waitMs == 0 && st.Index == index {
			pause(ctx, time.Second) // a dlockd that does not wait is polled
		}
		return st, err
	}
}

func decodeStatus(a *answer) (*Status, error) {
	if a.status != 200 {
		return nil, a.err()
	}
	var st Status
	if err := json.Unmarshal(a.body, &st); err != nil {
		return nil, fmt.Errorf("dlockd: bad status %q: %w", a.body, err)
	}
	return &st, nil
}
