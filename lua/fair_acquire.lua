--[[ fair_acquire.lua -- take a FIFO fair lock (Redisson RFairLock), or
  repeat or re-enter the caller's holding of it.
  libs: common fair
  KEYS[1] lock hash N                 KEYS[2] fencing counter redisson_lock_token:{N}
  KEYS[3] queue redisson_lock_queue:{N}
  KEYS[4] deadlines redisson_lock_timeout:{N}
  KEYS[5] channel prefix redisson_lock__channel:{N}; waiter w listens on <prefix>:<w>
  KEYS[6] holders dlockd_lock_owners:{N}
  KEYS[7] watchers' channel dlockd_lock_state:{N}: a new holding publishes
          'acquired' there (a refusal of the channel is let be)
  ARGV[1] lease ms                    ARGV[2] owner field
  ARGV[3] queue entry lifetime ms; "0" = try once, never queue
  ARGV[4] "1": a re-entry counts a hold; "0": it is a repeat, no hold added
  ARGV[5] the caller's token name (principal); "" with auth off
  ARGV[6] the most live places the queue may have (--max-fair-queue): a
          caller without a live place is not added past it
  ARGV[7] (unused: read holds' caps)
  ARGV[8] "1": ARGV[9] is the holder value to keep; "0": none given
  ARGV[10] the lease never runs past this (Redis' clock, ms: a session's
          end); "0": no bound
  Returns {1, token, holds, pttl, added, change}
                                   held (as in lock_acquire.lua: the
                                   holding's token, added 0 for a repeat,
                                   change for lock_undo.lua)
          {0, pttl, head, why, n}  not acquired; pttl of N (-2: free); head = 1
                                   when the caller is first in the queue;
                                   why 0: another owner holds N; why 1: N is
                                   free but the n other queued waiters go first
          {-2, 7, 0}               the owner holds N under another token name:
                                   nothing is written
          {-1}                     N is a read-write lock
          {-3}                     N, its counter, its queue or its holders'
                                   hash holds something that is not a lock's,
                                   or its deadlines do where they are read
                                   (with the queue's entries, or to queue the
                                   caller; a free lock nobody queues for is
                                   taken without them); nothing is written
          {-5, n}                  the caller would queue, but n live places
                                   (ARGV[6] or more) are queued already: it
                                   is not added (dead heads may be dropped)
  Only the queue head (or anyone, when nobody queues) may take a free lock.
  A queued caller's deadline becomes Redis' now + ARGV[3]: calling again is
  how a live waiter keeps its place; a waiter nobody refreshes is dropped
  once its deadline passes. Whoever becomes head is told on its channel,
  before anything is written: "0" when dead heads were dropped (it may go),
  "-<lease>" when the caller took the lock from the head of the queue (the
  next in line looks again when this lease ends). ]]
local owner = ARGV[2]
local refusal, kind, fields, left = acquire_refusal(KEYS[1], 'lock', owner, KEYS[2])
if refusal then
  return refusal
end
left = left or -2	-- N's pttl (free: none)
local now = now_ms()
local head, at, old_head, after = fair_head(KEYS[3], KEYS[4], now)
if head == nil then
  return {-3}	-- the queue is not a list, or its deadlines no zset (reads)
elseif not owners_ok(KEYS[6], kind) then
  return {-3}
end
local lease = bounded_lease(ARGV[1], ARGV[10])
local take = kind == 'none' and (not head or head == owner)
local reenter = kind ~= 'none' and field_of(fields, owner) ~= nil
if reenter and owners_refused(KEYS[6], owner, ARGV[5]) then
  return {-2, 7, 0}
end
-- sole: a free lock has no other holding the counter must outlive
local grant = {counter = KEYS[2], lease = lease, principal = ARGV[5], given = ARGV[8],
               value = ARGV[9], record = '1 0 0', fresh = true, sole = true, pttl = lease}

if take and head == owner then
  -- the next in line now watches this holder's lease: told its length, it
  -- need not try to read it
  if after == nil then
    after = redis.call('lindex', KEYS[3], at + 1)
  end
  fair_granted(KEYS[5], after, lease)
elseif not take and not reenter and head ~= old_head and head ~= owner then
  fair_notify(KEYS[5], head)	-- dead heads are dropped: the new one may go
end
if take and not owners_open(KEYS[6], owner, grant) then
  return {-3}	-- the holders' hash is not a hash: nothing written
end
fair_purge(KEYS[3], KEYS[4], now, at)
if take then
  if head == owner then
    redis.call('lpop', KEYS[3])
    redis.call('zrem', KEYS[4], owner)
  end
  redis.call('hset', KEYS[1], owner, '1')
  redis.call('pexpire', KEYS[1], ms(lease))
  local token, change = owners_grant(KEYS[6], KEYS[1], owner, grant)
  redis.pcall(PUBLISH, KEYS[7], 'acquired')
  return {1, token, 1, lease, 1, change}
end
if reenter then
  local before = now + left
  local holds, added
  if ARGV[4] == '1' then
    holds, added = redis.call('hincrby', KEYS[1], owner, '1'), 1
  else
    holds, added = tonumber(field_of(fields, owner)), 0
  end
  local pttl = lease_at_least(KEYS[1], lease, left)
  local token, change = owners_grant(KEYS[6], KEYS[1], owner, {
    counter = KEYS[2], lease = lease, principal = ARGV[5], given = ARGV[8], value = ARGV[9],
    record = string.format('%d %d 0', added, before), fresh = false, pttl = pttl})
  return {1, token, holds, pttl, added, change}
end
local life = tonumber(ARGV[3])
-- the deadlines' type, when the queue was empty (fair_head read none)
local queued = typed_call('zscore', KEYS[4], owner)
if queued == nil then
  return {-3}	-- before any write: an empty queue purged nothing
end
if life > 0 and not (queued and tonumber(queued) > now) then
  -- each place is walked by whoever leaves (fair_dequeue): cap them; a
  -- place whose deadline passed (not purged yet, behind a live head) is
  -- no place: its owner coming back meets the cap like anyone new
  local live = redis.call('zcount', KEYS[4], '(' .. now, '+inf')
  if live >= tonumber(ARGV[6]) then
    return {-5, live}
  end
end
if life > 0 then
  if redis.call('zadd', KEYS[4], now + life, owner) == 1 then
    redis.call('rpush', KEYS[3], owner)
    head = head or owner
    queued = true
  end
end
local others = redis.call('llen', KEYS[3]) - (queued and 1 or 0)
return {0, left, head == owner and 1 or 0, kind == 'none' and 1 or 0,
        others}
