// session.go -- a session of dlockd: one lease and one heartbeat for many
// holdings. Locks taken for it (one by one, or several all or none) live
// as long as it; its heartbeat renews them all every third of its lease,
// and the session is lost -- its Context and every holding's cancelled --
// when dlockd says it ended, when a heartbeat finds a holding dropped
// that this process did not release, or when no heartbeat was confirmed
// by its lease's end less a margin, as for a single lock.
package dlockd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"time"
)

// A SessionOption tunes NewSession.
type SessionOption func(map[string]any)

// WithSessionName names the session for humans (GET /sessions lists it).
func WithSessionName(name string) SessionOption {
	return func(b map[string]any) { b["name"] = name }
}

// WithSessionValue stores value with the session.
func WithSessionValue(value string) SessionOption {
	return func(b map[string]any) { b["value"] = value }
}

// Session is an open session of dlockd. Its Context is cancelled the
// moment it is known lost (and at Close), and so is every holding's.
type Session struct {
	c      *Client
	id     string
	ttl    time.Duration
	margin time.Duration

	ctx    context.Context // the holder's: cancelled on loss or Close
	cancel context.CancelFunc
	bg     context.Context // the heartbeat's
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	locks map[*Lock]bool   // the holdings taken through it, not yet released
	gone  map[Holding]bool // released here: their drop is no loss (token 0: any)
	lost  error            // why it was lost; nil if it was not
	ended bool             // lost or closed
	end   time.Time        // the lease this clock vouches for
}

// Holding is one lock a session holds, as dlockd lists it.
type Holding struct {
	Kind         Kind
	Name         string
	Owner        string
	FencingToken int64
}

// LockSpec names one lock of a LockAll: its kind, name and, for a
// semaphore only, its limit. An *Error's Lock names the one in the way.
type LockSpec struct {
	Kind  Kind
	Name  string
	Limit int
}

type wireHolding struct {
	Kind         string `json:"kind"`
	Name         string `json:"name"`
	Owner        string `json:"owner"`
	FencingToken int64  `json:"fencing_token"`
}

func (w wireHolding) holding() Holding {
	h := Holding{Kind: -1, Name: w.Name, Owner: w.Owner, FencingToken: w.FencingToken}
	for k, s := range kinds {
		if s.wire == w.Kind {
			h.Kind = k
		}
	}
	return h
}

// NewSession opens a session whose lease is ttl, renewed in the
// background every third of it until Close.
func (c *Client) NewSession(ctx context.Context, ttl time.Duration,
	opts ...SessionOption) (*Session, error) {
	if ttl < 3*time.Millisecond {
		return nil, fmt.Errorf("dlockd: a lease of %v is too short", ttl)
	}
	body := map[string]any{"ttl_ms": ttl.Milliseconds()}
	for _, f := range opts {
		f(body)
	}
	sent := time.Now()
	a, err := c.call(ctx, "POST", "/sessions", nil, body)
	if err != nil {
		return nil, &Error{Code: "unreachable", Err: err}
	}
	if a.status != 201 {
		return nil, a.err()
	}
	var made struct {
		Session string `json:"session"`
	}
	if err := json.Unmarshal(a.body, &made); err != nil || made.Session == "" {
		return nil, fmt.Errorf("dlockd: bad session %q: %v", a.body, err)
	}
	s := &Session{c: c, id: made.Session, ttl: ttl, margin: ttl/20 + 20*time.Millisecond,
		locks: map[*Lock]bool{}, gone: map[Holding]bool{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.bg, s.stop = context.WithCancel(context.Background())
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		keep(s.bg, s.ttl, s.margin, sent, s.heartbeat, s.lose, func(end time.Time) {
			s.mu.Lock()
			s.end = end
			s.mu.Unlock()
		})
	}()
	return s, nil
}

// WithSession runs fn with a new session, with a context cancelled when
// the session is lost (or ctx is done), and closes the session however fn
// ends, releasing all it holds. It returns fn's error; else, if the
// session was lost, an error matching ErrLost; else Close's.
func (c *Client) WithSession(ctx context.Context, ttl time.Duration,
	fn func(ctx context.Context, s *Session) error, opts ...SessionOption) error {
	s, err := c.NewSession(ctx, ttl, opts...)
	if err != nil {
		return err
	}
	return c.scoped(ctx, s.ctx, s.Err, s.Close, func(ctx context.Context) error {
		return fn(ctx, s)
	})
}

// ID is the session's id; TTL its lease.
func (s *Session) ID() string         { return s.id }
func (s *Session) TTL() time.Duration { return s.ttl }

// Context is cancelled the moment the session is known lost, and at
// Close: stop the work its holdings guard then.
func (s *Session) Context() context.Context { return s.ctx }

// Err is nil while the session lives or after Close; after a loss, an
// error that matches ErrLost and says why.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost
}

// Lock takes the lock name for the session (WithKind, WithWait, WithLimit
// and WithOwner as for Client.Lock; WithTTL is the session's). The holding
// is renewed by the session's heartbeat and ends with the session; its
// Release gives it back alone.
func (s *Session) Lock(ctx context.Context, name string, opts ...LockOption) (*Lock, error) {
	return s.c.Lock(ctx, name, append(opts, WithTTL(s.ttl),
		func(o *lockOptions) { o.session = s })...)
}

// LockAll takes every lock of specs for the session, or none, waiting up
// to wait for all of them at once (0: try once). It returns the holdings
// in the order of specs, each with its fencing token; or an *Error
// matching ErrConflict whose Lock names the lock in the way, with nothing
// held that this call took. A repeat answers the same holdings.
func (s *Session) LockAll(ctx context.Context, wait time.Duration,
	specs ...LockSpec) ([]*Lock, error) {
	list := make([]map[string]any, len(specs))
	for i, sp := range specs {
		list[i] = map[string]any{"kind": sp.Kind.spec().wire, "name": sp.Name}
		if sp.Limit != 0 {
			list[i]["limit"] = sp.Limit
		}
	}
	waitEnd := time.Now().Add(wait)
	var outage time.Time // when dlockd began to be unavailable; zero if it is not
	for {
		waitMs := s.c.pollFor(time.Until(waitEnd))
		rctx, rcancel := context.WithTimeout(ctx, time.Duration(waitMs)*time.Millisecond+slack)
		a, err := s.c.call(rctx, "PUT", "/sessions/"+url.PathEscape(s.id)+"/locks", nil,
			map[string]any{"locks": list, "wait_ms": waitMs})
		rcancel()
		if ctx.Err() != nil { // dlockd takes back what it may have granted
			return nil, &Error{Code: "aborted", Message: ctx.Err().Error(), Err: ctx.Err()}
		}
		var e *Error
		switch {
		case err != nil:
			e = &Error{Code: "unreachable", Err: err}
		case a.status == 200:
			return s.granted(a, specs)
		default:
			e = a.err()
		}
		retry := time.Duration(0)
		switch {
		case e.Is(ErrUnavailable):
			if outage.IsZero() {
				outage = time.Now()
			}
			if retry = e.RetryAfter; retry <= 0 {
				retry = 200 * time.Millisecond
			}
			if giveUp := outage.Add(s.c.retryFor); time.Now().Add(retry).After(giveUp) &&
				time.Now().Add(retry).After(waitEnd) {
				return nil, e
			}
		case s.c.learnPoll(e, waitMs):
			outage = time.Time{}
		case e.Code == "locked" && time.Now().Before(waitEnd):
			outage = time.Time{} // a long poll chained past --max-wait-ms
		default:
			return nil, e
		}
		if !pause(ctx, retry) {
			return nil, &Error{Code: "aborted", Message: ctx.Err().Error(), Err: ctx.Err()}
		}
	}
}

// granted makes the holdings of a LockAll's answer, in the order of specs.
func (s *Session) granted(a *answer, specs []LockSpec) ([]*Lock, error) {
	var got struct {
		Holdings []wireHolding `json:"holdings"`
	}
	if err := json.Unmarshal(a.body, &got); err != nil {
		return nil, fmt.Errorf("dlockd: bad grant %q: %w", a.body, err)
	}
	out := make([]*Lock, len(specs))
	for _, w := range got.Holdings {
		h := w.holding()
		for i, sp := range specs {
			if sp.Kind == h.Kind && sp.Name == h.Name {
				k := h.Kind.spec()
				o := &lockOptions{kind: h.Kind, ttl: s.ttl, owner: h.Owner, session: s}
				out[i] = s.c.held(k, h.Name, fmt.Sprintf(k.resource, url.PathEscape(h.Name)),
					o, h.FencingToken)
				s.add(out[i])
			}
		}
	}
	for i, l := range out {
		if l == nil {
			return nil, fmt.Errorf("dlockd: %s '%s' missing from the grant %q",
				specs[i].Kind.spec().name, specs[i].Name, a.body)
		}
	}
	return out, nil
}

// Holdings lists what the session holds, as dlockd reads it now.
func (s *Session) Holdings(ctx context.Context) ([]Holding, error) {
	a, err := s.c.call(ctx, "GET", "/sessions/"+url.PathEscape(s.id), nil, nil)
	if err != nil {
		return nil, &Error{Code: "unreachable", Err: err}
	}
	if a.status != 200 {
		return nil, a.err()
	}
	return decodeHoldings(a.body, "holdings")
}

func decodeHoldings(body []byte, field string) ([]Holding, error) {
	var got map[string]json.RawMessage
	var ws []wireHolding
	if err := json.Unmarshal(body, &got); err != nil {
		return nil, fmt.Errorf("dlockd: bad session %q: %w", body, err)
	}
	if err := json.Unmarshal(got[field], &ws); err != nil {
		return nil, fmt.Errorf("dlockd: bad %s in %q: %w", field, body, err)
	}
	out := make([]Holding, len(ws))
	for i, w := range ws {
		out[i] = w.holding()
	}
	return out, nil
}

// Close ends the session (heartbeats stop first: none is sent after it),
// releasing everything it holds; waiters on those locks are served at
// once. A session lost already is ended too, and its 404 is no error
// then. Calling Close again does nothing.
func (s *Session) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.ended && s.lost == nil {
		s.mu.Unlock()
		return nil
	}
	wasLost := s.lost != nil
	s.ended = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	s.endHoldings(nil)
	defer s.cancel()
	_, e := s.c.retrying(ctx, "DELETE", "/sessions/"+url.PathEscape(s.id), nil)
	if e == nil || e.Is(ErrSessionEnded) && wasLost {
		return nil
	}
	return e
}

// heartbeat renews the session and its holdings once, answered by `by`;
// nil when renewed with nothing dropped but what this process released.
func (s *Session) heartbeat(ctx context.Context, by time.Time) error {
	hctx, cancel := context.WithDeadline(ctx, by)
	defer cancel()
	a, err := s.c.call(hctx, "POST", "/sessions/"+url.PathEscape(s.id)+"/heartbeat", nil, nil)
	if err != nil {
		return &Error{Code: "unreachable", Err: err}
	}
	if a.status != 200 {
		return a.err()
	}
	dropped, err := decodeHoldings(a.body, "dropped")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range dropped {
		anyToken := h
		anyToken.FencingToken = 0
		if s.gone[h] {
			delete(s.gone, h)
			continue
		} else if s.gone[anyToken] {
			delete(s.gone, anyToken)
			continue
		}
		return &Error{Status: 200, Code: "not_held", Message: fmt.Sprintf(
			"the session's %s '%s' (fencing token %d) was dropped", h.Kind.spec().name,
			h.Name, h.FencingToken)}
	}
	return nil
}

// ranOut loses the session if its lease ran out as this clock counts it,
// whether or not the heartbeat goroutine has run since (a process paused
// past the lease): a holding's Held() asks it.
func (s *Session) ranOut() bool {
	s.mu.Lock()
	over := !s.ended && !s.end.IsZero() && !time.Now().Before(s.end)
	s.mu.Unlock()
	if over {
		s.lose("no renewal confirmed within the lease", nil)
	}
	return over
}

// add records a holding taken for the session.
func (s *Session) add(l *Lock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended { // lost meanwhile: so is the holding
		l.lose("its session was lost", s.lost)
		return
	}
	s.locks[l] = true
}

// released forgets a holding its Release gives back.
func (s *Session) released(l *Lock) {
	s.mu.Lock()
	delete(s.locks, l)
	s.mu.Unlock()
	s.forget(Holding{Kind: kindOf(l.kind), Name: l.name, Owner: l.owner,
		FencingToken: l.token})
}

// forget records a holding given back here (FencingToken 0: whichever
// was granted): dropped from the session by a heartbeat, it is no loss.
func (s *Session) forget(h Holding) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone[h] = true
}

func kindOf(spec kindSpec) Kind {
	for k, s := range kinds {
		if s == spec {
			return k
		}
	}
	return -1
}

// lose ends the session as lost: its Context and every holding's
// cancelled, nothing renewed.
func (s *Session) lose(why string, cause error) {
	s.mu.Lock()
	if !s.ended {
		s.ended = true
		s.lost = fmt.Errorf("%w: session %s: %s", ErrLost, s.id, why)
		if cause != nil {
			s.lost = fmt.Errorf("%w (%v)", s.lost, cause)
		}
	}
	lost := s.lost
	s.mu.Unlock()
	s.endHoldings(lost)
	s.cancel()
	s.stop()
}

// endHoldings ends every holding taken through the session: lost with it
// (lost not nil), or released by its Close.
func (s *Session) endHoldings(lost error) {
	s.mu.Lock()
	locks := s.locks
	s.locks = map[*Lock]bool{}
	s.mu.Unlock()
	for l := range locks {
		if lost != nil {
			l.lose("its session was lost", lost)
		} else {
			l.mu.Lock()
			l.held, l.released = false, true
			l.mu.Unlock()
			l.cancel()
		}
	}
}
