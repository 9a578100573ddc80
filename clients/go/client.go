// Package dlockd is the Go client of dlockd, the distributed lock service
// over HTTP: it takes a lock, keeps its lease alive in the background,
// tells the caller the moment the lease is lost (the held lock's Context
// is cancelled), and gives the lock back on every way out.
//
// client.go is the connection to dlockd: the Client, its requests and
// the errors dlockd answers; lock.go is a held lock and its lease;
// status.go reads and watches a lock's state.
package dlockd

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// DefaultURL is the dlockd a Client calls when neither its url nor
// $DLOCKD_URL names one.
const DefaultURL = "http://127.0.0.1:8080"

// maxPoll is the longest long poll asked for: dlockd's default
// --max-wait-ms. A dlockd set lower says so (400) and is followed.
const maxPoll = 300 * time.Second

// slack is how long past its wait_ms a request may take to be answered:
// dlockd answers a call Redis has not answered within 10 s.
const slack = 15 * time.Second

// Client calls one dlockd. It is safe for concurrent use.
type Client struct {
	url      string
	token    string
	http     *http.Client
	retryFor time.Duration
	pollMs   atomic.Int64 // the longest wait_ms this dlockd takes, learnt
}

// An Option configures a Client.
type Option func(*Client)

// WithToken sets the bearer token (default: $DLOCKD_TOKEN).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithTLS sets the TLS configuration for an https:// dlockd: RootCAs for
// a private CA, Certificates for mutual TLS.
func WithTLS(cfg *tls.Config) Option {
	return func(c *Client) {
		c.http.Transport.(*http.Transport).TLSClientConfig = cfg
	}
}

// WithHTTPClient replaces the HTTP client (its Timeout must be 0: each
// request gets a deadline of its own from the long poll it makes).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetryFor sets how long dlockd may stay unreachable or answer 503
// in a row before a call gives up (default 10 s; an acquire also retries
// for as long as its wait, always within its context's deadline).
func WithRetryFor(d time.Duration) Option { return func(c *Client) { c.retryFor = d } }

// NewClient returns a Client of the dlockd at baseURL ("" means
// $DLOCKD_URL, else DefaultURL), with the token of $DLOCKD_TOKEN unless
// WithToken gives one.
func NewClient(baseURL string, opts ...Option) *Client {
	if baseURL == "" {
		baseURL = os.Getenv("DLOCKD_URL")
	}
	if baseURL == "" {
		baseURL = DefaultURL
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 32
	c := &Client{
		url:      strings.TrimRight(baseURL, "/"),
		token:    os.Getenv("DLOCKD_TOKEN"),
		http:     &http.Client{Transport: tr},
		retryFor: 10 * time.Second,
	}
	c.pollMs.Store(maxPoll.Milliseconds())
	for _, o := range opts {
		o(c)
	}
	return c
}

// Sentinels an *Error matches with errors.Is, by the code dlockd answered.
var (
	// ErrConflict: not acquired within the wait (409 locked, or the
	// context's deadline passed while waiting).
	ErrConflict = errors.New("dlockd: not acquired: held by another owner")
	// ErrNotHeld: the lock is not (or no longer) held by this owner
	// (409 not_held or not_owner).
	ErrNotHeld = errors.New("dlockd: not held")
	// ErrUnauthorized: the token is missing, unknown, or may not do this
	// (401 unauthorized, 403 forbidden).
	ErrUnauthorized = errors.New("dlockd: unauthorized")
	// ErrUnavailable: dlockd could not be reached, or answered 503, for
	// longer than the call could retry.
	ErrUnavailable = errors.New("dlockd: unavailable")
	// ErrLost: the lease of a held lock was lost (Lock.Err).
	ErrLost = errors.New("dlockd: the lease was lost")
	// ErrLimitMismatch: a semaphore asked with another limit than the one
	// in force (409 limit_mismatch; the *Error's Limit is that one).
	// Nothing was changed.
	ErrLimitMismatch = errors.New("dlockd: not the semaphore's limit")
	// ErrSessionEnded: the session was ended, its lease ran out, or it
	// never existed (404 session_not_found): everything it held is
	// released.
	ErrSessionEnded = errors.New("dlockd: the session has ended")
)

// Error is an answer of dlockd that is not a success, with its JSON error
// code ("locked", "not_held", "unauthorized", "backend_unavailable", ...),
// a dlockd that could not be reached (Code "unreachable", Err the cause),
// or a wait the context ended (Code "timeout" or "aborted", Err the
// context's error).
type Error struct {
	Status     int    // the HTTP status; 0 when no answer came
	Code       string // dlockd's "error"; "unreachable", "timeout", "aborted" without an answer
	Message    string // dlockd's "message"
	RetryAfter time.Duration
	Err        error     // the cause: a network error, or the context's
	Limit      int       // limit_mismatch: the semaphore's limit in force
	Lock       *LockSpec // a refused Session.LockAll: the lock in the way
}

func (e *Error) Error() string {
	if e.Code == "unreachable" {
		return fmt.Sprintf("dlockd: unreachable: %v", e.Err)
	}
	if e.Status == 0 {
		return fmt.Sprintf("dlockd: %s: %s", e.Code, e.Message)
	}
	if e.Err != nil {
		return fmt.Sprintf("dlockd: %d %s: %s (%v)", e.Status, e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("dlockd: %d %s: %s", e.Status, e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinel of the error's kind.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrConflict:
		return e.Code == "locked" || e.Code == "too_many_holds" || e.Code == "timeout" ||
			e.Code == "aborted"
	case ErrNotHeld:
		return e.Code == "not_held" || e.Code == "not_owner"
	case ErrUnauthorized:
		return e.Status == 401 || e.Status == 403
	case ErrUnavailable:
		return e.Code == "unreachable" || e.Status == 503
	case ErrLimitMismatch:
		return e.Code == "limit_mismatch"
	case ErrSessionEnded:
		return e.Code == "session_not_found"
	}
	return false
}

// answer is one answer of dlockd.
type answer struct {
	status     int
	body       []byte
	retryAfter time.Duration
}

func (a *answer) err() *Error {
	e := &Error{Status: a.status, RetryAfter: a.retryAfter}
	var j struct {
		Error, Message string
		Limit          int
		Lock           *wireHolding
	}
	if json.Unmarshal(a.body, &j) == nil && j.Error != "" {
		e.Code, e.Message = j.Error, j.Message
		if j.Error == "limit_mismatch" {
			e.Limit = j.Limit
		}
		if j.Lock != nil {
			h := j.Lock.holding()
			e.Lock = &LockSpec{Kind: h.Kind, Name: h.Name}
		}
	} else {
		e.Code, e.Message = "http_"+strconv.Itoa(a.status), strings.TrimSpace(string(a.body))
	}
	return e
}

// call sends one request: body (if not nil) as JSON, query (if not nil)
// in the URL. An error is a request that got no answer.
func (c *Client) call(ctx context.Context, method, path string, query url.Values,
	body any) (*answer, error) {
	u := c.url + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	a := &answer{status: res.StatusCode, body: b}
	if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s >= 0 {
		a.retryAfter = time.Duration(s) * time.Second
	}
	return a, nil
}

// retrying sends a request without a body that may be repeated (a
// DELETE), again after Retry-After while dlockd is unreachable or answers
// 503, within ctx (bounded by the client's retryFor if it has no
// deadline). It returns a 200's answer, or the last refusal.
func (c *Client) retrying(ctx context.Context, method, path string,
	query url.Values) (*answer, *Error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.retryFor)
		defer cancel()
	}
	for {
		a, err := c.call(ctx, method, path, query, nil)
		var e *Error
		switch {
		case err != nil:
			e = &Error{Code: "unreachable", Err: err}
		case a.status == 200:
			return a, nil
		default:
			e = a.err()
		}
		if !e.Is(ErrUnavailable) {
			return nil, e
		}
		retry := e.RetryAfter
		if retry <= 0 {
			retry = 200 * time.Millisecond
		}
		if d, _ := ctx.Deadline(); time.Now().Add(retry).After(d) || !pause(ctx, retry) {
			return nil, e
		}
	}
}

// pollFor is the wait_ms of the next long poll of at most d.
func (c *Client) pollFor(d time.Duration) int64 {
	ms := d.Milliseconds()
	if max := c.pollMs.Load(); ms > max {
		ms = max
	}
	if ms < 0 {
		ms = 0
	}
	return ms
}

// learnPoll follows a dlockd whose --max-wait-ms is below what was asked
// (400 invalid_argument about wait_ms, "out of range 0..N"); false if
// the answer was about something else.
func (c *Client) learnPoll(e *Error, asked int64) bool {
	if e.Code != "invalid_argument" || !strings.Contains(e.Message, "wait_ms") || asked == 0 {
		return false
	}
	next := asked / 2
	if i := strings.LastIndex(e.Message, ".."); i >= 0 {
		digits := e.Message[i+2:]
		n := 0
		for n < len(digits) && digits[n] >= '0' && digits[n] <= '9' {
			n++
		}
		if v, err := strconv.ParseInt(digits[:n], 10, 64); err == nil && v < asked {
			next = v
		}
	}
	c.pollMs.Store(next)
	return true
}

// permanent says whether a request that got no answer will get none
// however often it is sent: dlockd's certificate was refused.
func permanent(err error) bool {
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}

// pause sleeps d, or until ctx is done (false then).
func pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
