// lock.go -- taking a lock and holding it: the acquire (long polls
// chained past dlockd's --max-wait-ms, 503s retried, a cancelled wait
// given back), the lease kept in the background (a heartbeat every third
// of the lease), and loss told at once through the held lock's Context:
// on not_held, on a watch that no longer sees the holding (a force
// release), and at the lease's end less a margin when renewals fail,
// counted on this process's monotonic clock from the sending of the last
// renewal dlockd confirmed.
package dlockd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Kind is a kind of lock of dlockd.
type Kind int

const (
	KindLock      Kind = iota // /locks/{name}: a plain lock
	KindFair                  // /fairlocks/{name}: waiters served in arrival order
	KindRead                  // /rwlocks/{name}/read: shared with other readers
	KindWrite                 // /rwlocks/{name}/write: excludes everyone
	KindSemaphore             // /semaphores/{name}: one of WithLimit's permits
)

// kindSpec is what the client needs to know of a kind: adding a kind of
// dlockd is adding a line to kinds.
type kindSpec struct {
	name     string // in messages
	resource string // the held resource's path, %s the escaped name
	status   string // the path of the lock's state
	side     string // the holder's side in the state; "" for any
	limited  bool   // takes a limit (WithLimit); the watch asks by owner
	wire     string // its "kind" in a session's holdings
}

var kinds = map[Kind]kindSpec{
	KindLock:      {"lock", "/locks/%s", "/locks/%s", "", false, "lock"},
	KindFair:      {"fair lock", "/fairlocks/%s", "/fairlocks/%s", "", false, "fair"},
	KindRead:      {"read lock", "/rwlocks/%s/read", "/rwlocks/%s", "read", false, "read"},
	KindWrite:     {"write lock", "/rwlocks/%s/write", "/rwlocks/%s", "write", false, "write"},
	KindSemaphore: {"semaphore", "/semaphores/%s", "/semaphores/%s", "", true, "semaphore"},
}

func (k Kind) spec() kindSpec {
	s, ok := kinds[k]
	if !ok {
		panic(fmt.Sprintf("dlockd: unknown Kind %d", int(k)))
	}
	return s
}

// A LockOption tunes one acquire.
type LockOption func(*lockOptions)

type lockOptions struct {
	kind       Kind
	ttl        time.Duration
	wait       time.Duration
	waitSet    bool
	owner      string
	ownerGiven bool
	limit      int      // KindSemaphore's permits; 0 when not given
	session    *Session // held for this session, with its lease; nil: a lease of its own
}

// WithKind picks the kind of lock (default KindLock).
func WithKind(k Kind) LockOption { return func(o *lockOptions) { o.kind = k } }

// WithTTL sets the lease (default 15 s), renewed every third of it.
func WithTTL(d time.Duration) LockOption { return func(o *lockOptions) { o.ttl = d } }

// WithWait bounds the wait for the lock (0: fail at once if it is held).
// Without it the wait lasts until the context is done.
func WithWait(d time.Duration) LockOption {
	return func(o *lockOptions) { o.wait, o.waitSet = d, true }
}

// WithOwner sets the owner id (default: one unique to this acquire). Two
// acquires with one owner id both "hold" the lock; and a wait cancelled
// with a given owner id does not give back what it may have been granted
// (the release could take another's hold of that owner).
func WithOwner(owner string) LockOption {
	return func(o *lockOptions) { o.owner, o.ownerGiven = owner, true }
}

// WithLimit sets how many permits a semaphore (KindSemaphore) has; it
// must be the limit in force when the semaphore exists (else an error
// matching ErrLimitMismatch names that one). Semaphore sets it.
func WithLimit(n int) LockOption { return func(o *lockOptions) { o.limit = n } }

// Lock is a held lock. Its Context is cancelled the moment its lease is
// known lost (and at Release); Held then says false for good.
type Lock struct {
	c        *Client
	kind     kindSpec
	name     string
	owner    string
	token    int64
	ttl      time.Duration
	margin   time.Duration
	resource string   // the escaped path of the held resource
	session  *Session // the session it is held for; nil: renewed on its own

	ctx    context.Context // the holder's: cancelled on loss or release
	cancel context.CancelFunc
	bg     context.Context // the renewer's and watcher's
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	held     bool
	lost     error     // why the lease was lost; nil if it was not
	end      time.Time // the lease this clock vouches for; zero: a session's holding
	released bool
}

// Name, Owner, FencingToken and TTL describe the holding.
func (l *Lock) Name() string  { return l.name }
func (l *Lock) Owner() string { return l.owner }

// FencingToken is the holding's token: pass it on to what the lock
// protects, so that a stale holder can be refused.
func (l *Lock) FencingToken() int64 { return l.token }
func (l *Lock) TTL() time.Duration  { return l.ttl }

// Context is cancelled the moment the lease is known lost, and at
// Release: stop the work it guards then.
func (l *Lock) Context() context.Context { return l.ctx }

// Held says whether the lease is still this holder's, as far as it can
// be known: false for good after a loss or Release. It reads the clock
// too: a process paused past its lease (SIGSTOP, a frozen VM) sees false
// at once when it resumes, and the loss is then reported as any other,
// before the renewer has run again.
func (l *Lock) Held() bool {
	l.mu.Lock()
	held, end := l.held, l.end
	l.mu.Unlock()
	if held && l.session != nil && l.session.ranOut() {
		return false // the session's lease: lost with it, this holding too
	}
	if held && !end.IsZero() && !time.Now().Before(end) {
		l.lose("no renewal confirmed within the lease", nil)
		return false
	}
	return held
}

// Err is nil while held or after a Release; after a loss, an error that
// matches ErrLost and says why.
func (l *Lock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Lock takes the lock name (kind, lease, wait and owner by opts), waiting
// until it is granted, the wait ends (an error matching ErrConflict) or
// ctx is done; a wait cut short gives back the queue place or anything
// granted meanwhile. The lock is renewed until Release.
func (c *Client) Lock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	o := lockOptions{kind: KindLock, ttl: 15 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	if !o.ownerGiven {
		o.owner = newOwner()
	}
	if o.ttl < 3*time.Millisecond {
		return nil, fmt.Errorf("dlockd: a lease of %v is too short", o.ttl)
	}
	if k := o.kind.spec(); k.limited && o.limit < 1 {
		return nil, fmt.Errorf("dlockd: a %s needs a limit of 1 or more (WithLimit), not %d",
			k.name, o.limit)
	} else if !k.limited && o.limit != 0 {
		return nil, fmt.Errorf("dlockd: a %s takes no limit", k.name)
	}
	return c.acquire(ctx, name, &o)
}

// FairLock, ReadLock and WriteLock are Lock of the other kinds.
func (c *Client) FairLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return c.Lock(ctx, name, append(opts, WithKind(KindFair))...)
}
func (c *Client) ReadLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return c.Lock(ctx, name, append(opts, WithKind(KindRead))...)
}
func (c *Client) WriteLock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return c.Lock(ctx, name, append(opts, WithKind(KindWrite))...)
}

// Semaphore takes one of the limit permits of semaphore name: at most
// limit holders at once, each with a lease of its own, held, renewed,
// watched and released as a Lock is. A limit other than the one in force
// is an error matching ErrLimitMismatch (its Limit the one in force).
func (c *Client) Semaphore(ctx context.Context, name string, limit int,
	opts ...LockOption) (*Lock, error) {
	return c.Lock(ctx, name, append(opts, WithKind(KindSemaphore), WithLimit(limit))...)
}

// WithLock runs fn holding the lock, with a context cancelled when the
// lease is lost (or ctx is done) that carries the lock (FromContext), and releases the lock however fn ends,
// a panic included (which goes on after the release). It returns fn's
// error; else, if the lease was lost, an error matching ErrLost; else
// the release's.
func (c *Client) WithLock(ctx context.Context, name string, fn func(ctx context.Context) error,
	opts ...LockOption) (err error) {
	l, err := c.Lock(ctx, name, opts...)
	if err != nil {
		return err
	}
	lost := func() error {
		l.Held() // a lease that ran out by the clock is lost
		return l.Err()
	}
	return c.scoped(context.WithValue(ctx, heldKey{}, l), l.ctx, lost, l.Release, fn)
}

// scoped runs fn with a context cancelled when held is (the holding is
// lost) or ctx is done, and then release, however fn ends (a panic goes
// on after it). It returns fn's error (when that is the cancel a loss
// caused, the loss's, which still wraps it); else lost's (asked before
// the release too: a lease that ran out while fn ran); else release's.
func (c *Client) scoped(ctx, held context.Context, lost func() error,
	release func(context.Context) error, fn func(ctx context.Context) error) (err error) {
	body, cancel := context.WithCancel(ctx)
	go func() { // the body's context ends with the holding
		select {
		case <-held.Done():
			cancel()
		case <-body.Done():
		}
	}()
	defer func() {
		cancel()
		lerr := lost()
		rctx, rcancel := context.WithTimeout(context.Background(), c.retryFor)
		rerr := release(rctx)
		rcancel()
		if lerr == nil {
			lerr = lost()
		}
		switch {
		case err != nil && lerr != nil && errors.Is(err, context.Canceled) && ctx.Err() == nil:
			err = fmt.Errorf("%w (%v)", lerr, err) // the body saw the cancel the loss made
		case err != nil:
		case lerr != nil:
			err = lerr
		default:
			err = rerr
		}
	}()
	return fn(body)
}

type heldKey struct{}

// FromContext is the lock WithLock holds for the body given ctx.
func FromContext(ctx context.Context) (*Lock, bool) {
	l, ok := ctx.Value(heldKey{}).(*Lock)
	return l, ok
}

func newOwner() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' ||
			r == '.' {
			return r
		}
		return '_'
	}, host)
	if len(host) > 64 {
		host = host[:64]
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("go-%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

type grant struct {
	FencingToken int64 `json:"fencing_token"`
	TTLMs        int64 `json:"ttl_ms"`
}

func (c *Client) acquire(ctx context.Context, name string, o *lockOptions) (*Lock, error) {
	k := o.kind.spec()
	path := fmt.Sprintf(k.resource, url.PathEscape(name))
	var waitEnd time.Time // zero: until ctx is done
	if o.waitSet {
		waitEnd = time.Now().Add(o.wait)
	}
	var last *Error      // the last refusal, for the error at the end
	var outage time.Time // when dlockd began to be unavailable; zero if it is not
	for {
		now := time.Now()
		left := maxPoll
		if !waitEnd.IsZero() {
			left = waitEnd.Sub(now)
		}
		if d, ok := ctx.Deadline(); ok && d.Sub(now)-200*time.Millisecond < left {
			left = d.Sub(now) - 200*time.Millisecond // answered before ctx ends
		}
		waitMs := c.pollFor(left)
		body := map[string]any{"owner": o.owner, "wait_ms": waitMs}
		if o.session != nil {
			body["session"] = o.session.id
		} else {
			body["ttl_ms"] = o.ttl.Milliseconds()
		}
		if k.limited {
			body["limit"] = o.limit
		}
		rctx, rcancel := context.WithTimeout(ctx, time.Duration(waitMs)*time.Millisecond+slack)
		sent := time.Now()
		a, err := c.call(rctx, "PUT", path, nil, body)
		rcancel()
		if ctx.Err() != nil {
			// the grant may be on its way: give it back
			if !o.ownerGiven {
				if o.session != nil { // its token unknown: any is no loss
					o.session.forget(Holding{Kind: o.kind, Name: name, Owner: o.owner})
				}
				c.giveBack(path, o.owner)
			}
			code := "aborted"
			if ctx.Err() == context.DeadlineExceeded {
				code = "timeout"
			}
			return nil, &Error{Code: code, Message: fmt.Sprintf("%s '%s' not acquired: %v",
				k.name, name, ctx.Err()), Err: ctx.Err()}
		}
		var e *Error
		switch {
		case err != nil && permanent(err):
			return nil, err
		case err != nil:
			e = &Error{Code: "unreachable", Err: err}
		case a.status == 200:
			var g grant
			if err := json.Unmarshal(a.body, &g); err != nil {
				return nil, fmt.Errorf("dlockd: bad grant %q: %w", a.body, err)
			}
			l := c.held(k, name, path, o, g.FencingToken)
			if o.session != nil { // renewed by the session's heartbeat
				o.session.add(l)
				return l, nil
			}
			// a grant that came late in its poll: its lease may have begun
			// long before this clock can vouch for; renew it at once
			if time.Since(sent) <= o.ttl/10 {
				l.start(sent)
				return l, nil
			}
			hsent := time.Now()
			if err := l.heartbeat(ctx, hsent.Add(o.ttl/3)); err == nil {
				l.start(hsent)
				return l, nil
			}
			if !o.ownerGiven {
				c.giveBack(path, o.owner)
			}
			continue // lost already, or unknown: try again
		default:
			e = a.err()
		}
		if e.Is(ErrUnavailable) {
			if outage.IsZero() {
				outage = now
			}
			giveUp := outage.Add(c.retryFor)
			if waitEnd.After(giveUp) {
				giveUp = waitEnd
			} else if d, ok := ctx.Deadline(); ok && !o.waitSet && d.After(giveUp) {
				giveUp = d // waiting until ctx ends: as long
			}
			if d, ok := ctx.Deadline(); ok && d.Before(giveUp) {
				giveUp = d
			}
			next := e.RetryAfter
			if next <= 0 {
				next = 200 * time.Millisecond
			}
			if time.Now().Add(next).After(giveUp) {
				return nil, e
			}
			pause(ctx, next) // a ctx done is seen after the next call
			continue
		}
		outage = time.Time{}
		if c.learnPoll(e, waitMs) {
			continue
		}
		if e.Code != "locked" {
			return nil, e
		}
		last = e
		if !waitEnd.IsZero() && !time.Now().Before(waitEnd) {
			return nil, last
		}
		if waitMs == 0 { // a dlockd that does not wait is polled
			next := last.RetryAfter
			if next <= 0 || next > time.Second {
				next = time.Second
			}
			pause(ctx, next)
		}
	}
}

// giveBack releases what a cut-short acquire may have been granted.
func (c *Client) giveBack(path, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = c.call(ctx, "DELETE", path, url.Values{"owner": {owner}}, nil)
}

func (c *Client) held(k kindSpec, name, path string, o *lockOptions, token int64) *Lock {
	l := &Lock{c: c, kind: k, name: name, owner: o.owner, token: token, ttl: o.ttl,
		margin: o.ttl/20 + 20*time.Millisecond, resource: path, session: o.session, held: true}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.bg, l.stop = context.WithCancel(context.Background())
	return l
}

// start runs the renewer and the watcher; confirmed is the sending of
// the request that last set the lease.
func (l *Lock) start(confirmed time.Time) {
	l.end = confirmed.Add(l.ttl - l.margin)
	l.wg.Add(2)
	go l.renew(confirmed)
	go l.watch()
}

// lose ends the holding: Held false, Context cancelled, nothing renewed.
func (l *Lock) lose(why string, cause error) {
	l.mu.Lock()
	if l.held {
		l.held = false
		l.lost = fmt.Errorf("%w: %s '%s': %s", ErrLost, l.kind.name, l.name, why)
		if cause != nil {
			l.lost = fmt.Errorf("%w (%v)", l.lost, cause)
		}
	}
	l.mu.Unlock()
	l.cancel()
	l.stop()
}

// heartbeat renews the lease once, answered by `by`; nil when renewed.
func (l *Lock) heartbeat(ctx context.Context, by time.Time) error {
	hctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	a, err := l.c.call(hctx, "POST", l.resource+"/heartbeat", nil,
		map[string]any{"owner": l.owner, "ttl_ms": l.ttl.Milliseconds()})
	if err != nil {
		return &Error{Code: "unreachable", Err: err}
	}
	if a.status != 200 {
		return a.err()
	}
	return nil
}

func (l *Lock) renew(confirmed time.Time) {
	defer l.wg.Done()
	keep(l.bg, l.ttl, l.margin, confirmed, l.heartbeat, l.lose, func(end time.Time) {
		l.mu.Lock()
		l.end = end
		l.mu.Unlock()
	})
}

// keep renews a lease of ttl by beat every third of it until bg is done,
// and calls lose when dlockd says it is gone (not held, or the session
// ended) or when no beat was confirmed by the lease's end less margin,
// counted from the sending of the last beat confirmed; vouch is told
// that end each time it moves.
func keep(bg context.Context, ttl, margin time.Duration, confirmed time.Time,
	beat func(context.Context, time.Time) error, lose func(string, error),
	vouch func(time.Time)) {
	next := confirmed.Add(ttl / 3)
	for {
		end := confirmed.Add(ttl - margin) // the lease this clock can vouch for
		vouch(end)
		at := next
		if end.Before(at) {
			at = end
		}
		if !pause(bg, time.Until(at)) {
			return
		}
		if !time.Now().Before(end) {
			lose("no renewal confirmed within the lease", nil)
			return
		}
		sent := time.Now()
		by := sent.Add(ttl / 3)
		if end.Before(by) {
			by = end
		}
		err := beat(bg, by)
		if bg.Err() != nil {
			return
		}
		if err == nil {
			confirmed, next = sent, sent.Add(ttl/3)
			continue
		}
		if e, ok := err.(*Error); ok && (e.Is(ErrNotHeld) || e.Is(ErrSessionEnded)) {
			lose("dlockd says "+e.Code, e)
			return
		}
		retry := ttl / 10
		if e, ok := err.(*Error); ok && e.RetryAfter > 0 && e.RetryAfter < retry {
			retry = e.RetryAfter
		}
		if retry > time.Second {
			retry = time.Second
		}
		next = time.Now().Add(retry)
	}
}

// watch waits for the lock's state to change (a long poll, woken by
// dlockd's pub/sub) and ends the holding the moment the state no longer
// shows it: a force release is seen within a round trip.
func (l *Lock) watch() {
	defer l.wg.Done()
	index := l.token
	statusPath := fmt.Sprintf(l.kind.status, url.PathEscape(l.name))
	owner := "" // a semaphore's holders list its first 100 only: ask by owner
	if l.kind.limited {
		owner = l.owner
	}
	for l.bg.Err() == nil {
		st, err := l.c.watchPath(l.bg, statusPath, owner, index, maxPoll)
		if l.bg.Err() != nil {
			return
		}
		if err != nil {
			var retry = time.Second
			if e, ok := err.(*Error); ok {
				if e.Status == 401 || e.Status == 403 || e.Status == 400 {
					return // this token may not watch: the renewer still tells
				}
				if e.RetryAfter > 0 {
					retry = e.RetryAfter
				}
			}
			pause(l.bg, retry)
			continue
		}
		if !st.holds(l.owner, l.kind.side) {
			l.lose("dlockd no longer shows it held (released by force, or its lease ended)", nil)
			return
		}
		index = st.Index
	}
}

// Release gives the lock back (one DELETE, retried on 503 and on no
// answer within ctx) after stopping the renewals: none is sent after it.
// A lock lost already is released too, in case dlockd still has it; its
// not_held is no error then. Calling Release again does nothing.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	wasLost := l.lost != nil
	l.held = false
	l.mu.Unlock()
	l.stop()
	l.wg.Wait()
	defer l.cancel()
	if l.session != nil { // its drop at the next heartbeat is no loss
		l.session.released(l)
	}
	_, e := l.c.retrying(ctx, "DELETE", l.resource, url.Values{"owner": {l.owner}})
	if e == nil || e.Is(ErrNotHeld) && wasLost {
		return nil
	}
	return e
}
