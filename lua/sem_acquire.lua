--[[ sem_acquire.lua -- take one permit of a semaphore (Redisson's
  RPermitExpirableSemaphore), or repeat the caller's: one permit per owner.
  libs: common sem
  KEYS[1] count N                     KEYS[2] permits {N}:timeout
  KEYS[3] channel redisson_sc:{N}     KEYS[4] fencing counter redisson_lock_token:{N}
  KEYS[5] holders dlockd_lock_owners:{N}
  KEYS[6] waiting owners dlockd_sem_waiters:{N}
  KEYS[7] watchers' channel dlockd_lock_state:{N}: a new permit publishes
          'acquired' there (a refusal of the channel is let be)
  ARGV[1] lease ms                    ARGV[2] owner
  ARGV[3] queue place life ms (0: the caller will not wait)
  ARGV[4] the limit the caller gives  ARGV[5] the caller's token name ("": auth off)
  ARGV[6] "1": ARGV[7] is the holder value to keep; "0": none given (a
          repeat keeps the value it had)
  ARGV[8] the lease never runs past this (Redis' clock, ms: a session's
          end); "0": no bound
  Returns {1, token, 1, pttl, added, change}
                                   held: token is the permit's, the same for
                                   every repeat; pttl the lease now in force;
                                   added 1 for a new permit, 0 for a repeat
                                   (the lease is then max(remaining, lease));
                                   change numbers it for sem_undo.lua
          {0, pttl, 0, 10, limit}  every permit is out; pttl until the
                                   earliest lease end (-1: none ends); a
                                   caller that will wait keeps a place in
                                   KEYS[6] (counted by GET, never ordered)
          {-6, limit}              the limit in force is another: nothing is
                                   written
          {-2, 7, 0}               the owner holds a permit under another
                                   token name
          {-1}                     N is a lock
          {-3}                     a key holds something that is not a
                                   semaphore's
  The semaphore is made with ARGV[4] permits when N is absent (less the
  permits out, Redisson's). Permits past their lease end are taken back
  first, and their count published. ]]
local lease, owner, life = bounded_lease(ARGV[1], ARGV[8]), ARGV[2], tonumber(ARGV[3])
local limit, principal = tonumber(ARGV[4]), ARGV[5]
local refusal = sem_refusal(KEYS[1], nil, KEYS[4], nil, KEYS[6])
if refusal then
  return refusal
end
local now = now_ms()
-- the permits' first read, before any write, is their type check
local out = typed_call('zcard', KEYS[2])
if not out then
  return {-3}	-- the permits are no zset
end
-- none out and nobody waiting: every holders' entry is stale, and the
-- grant's first write (owners_open) checks the holders' hash
local open = out == 0 and type_seen[KEYS[6]] == 'none'
if not owners_ok(KEYS[5], open and 'none' or 'sem') then
  return {-3}
end
local expired, score = {}, false
if out > 0 then
  expired = sem_expired(KEYS[2], now)
  score = redis.call('zscore', KEYS[2], owner)
end
if score and tonumber(score) <= now then
  -- the caller's own permit ran out: it comes back now, whatever the batch
  local listed = false
  for _, m in ipairs(expired) do
    listed = listed or m == owner
  end
  if not listed then
    expired[#expired + 1] = owner
  end
end
out = out - #expired
local had = counter_seen[KEYS[1]]	-- N's count, read by sem_refusal (false: none)
local free = had
if free then
  free = tonumber(free) + #expired
  if free + out ~= limit then
    return {-6, free + out}
  end
elseif out > limit then
  return {-6, out}
else
  free = limit - out
end
local held = score and tonumber(score) > now
if held and owners_refused(KEYS[5], owner, principal) then
  return {-2, 7, 0}
end
if #expired > 0 then
  redis.call(PUBLISH, KEYS[3], tostring(#expired))
end
sem_reclaim(KEYS[1], KEYS[2], KEYS[5], expired)
if type_seen[KEYS[6]] ~= 'none' then
  redis.call('zremrangebyscore', KEYS[6], 0, now)	-- places of waiters long gone
end
if not held and free < 1 then
  if life > 0 then
    redis.call('zadd', KEYS[6], now + life, owner)
    lease_at_least(KEYS[6], life)
  end
  return {0, sem_nearest(KEYS[2], now), 0, 10, limit}
end
local added, before, ends = 0, 0, now + lease
if held then
  before = tonumber(score)
  if before > ends then
    ends = before
  end
else
  added = 1
end
-- sole: with no other permit out, no other holding the counter must outlive
local grant = {counter = KEYS[4], lease = ends - now, principal = principal, given = ARGV[6],
               value = ARGV[7], record = string.format('%d %d 0', added, before),
               fresh = not held, sole = out == 0 and not held}
if open and not owners_open(KEYS[5], owner, grant) then
  return {-3}	-- the holders' hash is not a hash: nothing written
end
-- N made now (free of them, less this permit), or counted down
if not had then
  redis.call('set', KEYS[1], string.format('%d', free - added))
elseif added == 1 then
  redis.call('decrby', KEYS[1], '1')
end
redis.call('zadd', KEYS[2], ends, owner)
if type_seen[KEYS[6]] ~= 'none' then
  redis.call('zrem', KEYS[6], owner)	-- its place as a waiter, if it had one
end
local token, change = owners_grant(KEYS[5], nil, owner, grant)
if added == 1 then
  redis.pcall(PUBLISH, KEYS[7], 'acquired')
end
return {1, token, 1, ends - now, added, change}
