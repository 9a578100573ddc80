// Type declarations of dlockd, the Node client of dlockd (index.js).

export declare const DEFAULT_URL: string;

export type Kind = 'lock' | 'fair' | 'read' | 'write' | 'semaphore';

export interface ClientOptions {
  /** dlockd's URL; default $DLOCKD_URL, else DEFAULT_URL. */
  url?: string;
  /** Bearer token of --auth-file; default $DLOCKD_TOKEN. */
  token?: string;
  /** https: the CA that signed dlockd's certificate (PEM). */
  ca?: string | Buffer | Array<string | Buffer>;
  /** https with --tls-client-ca: the client certificate and its key (PEM). */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** How long dlockd may be unreachable or answer 503 in a row before a call gives up; default 10000. */
  retryForMs?: number;
}

export interface AcquireOptions {
  /** Default 'lock'. */
  kind?: Kind;
  /** A semaphore's permits (1..10000), which it needs; the first acquirer makes it with them. */
  limit?: number;
  /** The lease, renewed every third of it; default 15000. */
  ttlMs?: number;
  /** How long to wait; default until signal aborts; 0: fail at once if held. */
  waitMs?: number;
  /** The owner id; default one unique to this acquire. */
  owner?: string;
  /** Aborts the wait (giving back a queue place, or what was granted meanwhile); in withLock, also the body's signal. */
  signal?: AbortSignal;
}

export interface Holder {
  owner?: string;
  holds: number;
  fencing_token?: number;
  ttl_ms: number;
  side?: 'read' | 'write';
  /** The holding's value, if any. */
  value?: string;
}

export interface LockStatus {
  name: string;
  locked: boolean;
  ttl_ms: number;
  index: number;
  changed?: boolean;
  holds?: number;
  mode?: 'none' | 'read' | 'write';
  readers?: number;
  holders: Holder[];
  queue?: Array<{ owner?: string; ttl_ms: number }>;
  queue_length?: number;
  /** Semaphores: the permits in all (0: no semaphore), free now, out, and the acquires waiting. */
  limit?: number;
  available?: number;
  held?: number;
  waiting?: number;
  /** Asked by owner: whether that owner holds it. */
  held_by_owner?: boolean;
}

export declare class DlockdError extends Error {
  /** The HTTP status; 0 when no answer came. */
  status: number;
  /** dlockd's JSON error code ("locked", "not_held", "unauthorized", ...), "unreachable", "timeout" or "aborted". */
  code: string;
  retryAfterMs: number;
}
/** Not acquired within the wait (409 locked), or the wait was aborted. */
export declare class ConflictError extends DlockdError {
  /** A multi-lock's (Session.acquireAll): the lock in the way. */
  lock?: { kind: Kind; name: string };
}
/** 409 not_held or not_owner; 404 session_not_found (the session ended). */
export declare class NotHeldError extends DlockdError {}
/** 401 unauthorized, 403 forbidden. */
export declare class UnauthorizedError extends DlockdError {}
/** Unreachable, or 503, for longer than the call could retry. */
export declare class UnavailableError extends DlockdError {}
/** 409 limit_mismatch: a semaphore asked with another limit than the one in force. */
export declare class LimitMismatchError extends DlockdError {
  /** The semaphore's limit in force. */
  limit: number;
}
/** The reason of a held lock's signal when its lease was lost. */
export declare class LostError extends Error {}

export declare class HeldLock {
  readonly name: string;
  readonly owner: string;
  /** Pass it on to what the lock protects, so that a stale holder can be refused. */
  readonly fencingToken: number;
  readonly ttlMs: number;
  /** Aborted the moment the lease is known lost (reason: a LostError), and at release. */
  readonly signal: AbortSignal;
  /** False for good after a loss or release. */
  readonly held: boolean;
  /** Why the lease was lost; null if it was not. */
  readonly lostError: LostError | null;
  /** Stops the renewals, then gives the lock back. */
  release(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export interface SessionOptions {
  /** The session's lease, renewed every third of it; default 15000. */
  ttlMs?: number;
  /** A name for humans. */
  name?: string;
  /** A value kept with the session. */
  value?: string;
}

/** A lock held for a session. */
export interface SessionHolding {
  kind: Kind;
  name: string;
  owner: string;
  /** Pass it on to what the lock protects, so that a stale holder can be refused. */
  fencingToken: number;
}

export interface SessionLock {
  kind: Kind;
  name: string;
  /** A semaphore's permits, which it needs. */
  limit?: number;
}

/** One lease and one heartbeat for every lock taken for it; lost on 404, a dropped holding, or no renewal within the lease. */
export declare class Session {
  /** The session's id (32 hex digits). */
  readonly id: string;
  readonly ttlMs: number;
  /** Aborted the moment the session is known lost (reason: a LostError), and at close. */
  readonly signal: AbortSignal;
  /** False for good after a loss or close. */
  readonly held: boolean;
  /** Why the session was lost; null if it was not. */
  readonly lostError: LostError | null;
  /** Takes a lock for the session (owner: the session id unless given); it lives as long as the session. */
  acquire(name: string, options?: Omit<AcquireOptions, 'ttlMs'>): Promise<SessionHolding>;
  /** Takes every lock listed, or none (a ConflictError naming the lock in the way). */
  acquireAll(locks: SessionLock[], options?: { waitMs?: number; signal?: AbortSignal }): Promise<SessionHolding[]>;
  /** What the session holds now. */
  holdings(): Promise<SessionHolding[]>;
  /** Stops the heartbeats, then ends the session: everything it holds is released. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

export declare class Client {
  constructor(options?: ClientOptions);
  acquire(name: string, options?: AcquireOptions): Promise<HeldLock>;
  withLock<T>(name: string, fn: (signal: AbortSignal, held: HeldLock) => Promise<T> | T,
    options?: AcquireOptions): Promise<T>;
  /** acquire(name, {...options, kind: 'semaphore', limit}): one of limit permits. */
  semaphore(name: string, limit: number, options?: Omit<AcquireOptions, 'kind' | 'limit'>): Promise<HeldLock>;
  status(name: string, options?: { kind?: Kind; signal?: AbortSignal }): Promise<LockStatus>;
  /** Resolves when the state's index differs from index. */
  watch(name: string, index: number, options?: { kind?: Kind; signal?: AbortSignal }): Promise<LockStatus>;
  /** Makes a session, renewed in the background until close(). */
  session(options?: SessionOptions): Promise<Session>;
  /** Runs fn in a new session and ends it however fn ends; rejects with a LostError if it was lost. */
  withSession<T>(fn: (signal: AbortSignal, session: Session) => Promise<T> | T,
    options?: SessionOptions & { signal?: AbortSignal }): Promise<T>;
  /** Closes idle connections. */
  close(): void;
}
