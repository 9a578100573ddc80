--[[ lib/sem.lua -- the semaphore's layout, Redisson's RPermitExpirableSemaphore
  byte for byte (docs/internals/architecture.md, "What dlockd keeps in Redis"):
    N                 a string: how many permits are free (SET by whoever
                      creates it, no TTL: Redisson's trySetPermits)
    {N}:timeout       a zset: one member per permit out, its score the
                      permit's lease end in ms (Redis' clock for dlockd's,
                      the client's wall clock for Redisson's; Redisson's
                      permits without a lease score SEM_NO_EXPIRY). A
                      dlockd permit's member is its owner id; Redisson's are
                      16 random bytes
    redisson_sc:{N}   the channel: a number, how many permits came back
                      (Redisson publishes how many are free)
  The limit in force is free + permits out, as Redisson's getPermits counts.
  A permit past its lease end is taken back by whoever runs next (Redisson
  does the same): it is no longer counted, N gets it back and its return
  is published. dlockd's own: the holders' hash (lib/common.lua) keeps per
  permit '<token> <principal>', its change number '#<owner>' and its holder
  value '=<owner>'; an entry counts only while the zset has the permit.
  sem_refusal(n, permits, counter, owners, waiters)
                              (permits, counter, owners and waiters may be
                              nil: not checked; a script that passes no
                              permits checks them by its first read of
                              them, sem_expired's, sem_held_refusal's or
                              sem_acquire's ZCARD; one that passes no
                              owners, with owners_ok or owners_open)
                              nil when every key is a semaphore's (or
                              absent), else the reply to give: {-1} N is a
                              lock, {-3} anything else that is not a
                              semaphore's. N's count is read (GET): it is
                              counter_seen[n] after (false: absent)
  sem_held_refusal(n, permits, owners, owner, principal, now)
                              the checks a release or renewal of owner's
                              permit starts with: nil and the permit's
                              score to go on, else the reply to give (those
                              of sem_refusal, {0} owner holds no live
                              permit, {-2, 7, 0} it holds it under another
                              token name); the permits' type is checked by
                              their ZSCORE
  sem_expired(permits, now)   the members past their lease end (at most
                              SEM_RECLAIM_MAX): read only; nil when permits
                              is not a zset (the read is its type check)
  sem_reclaim(n, permits, owners, expired)
                              take expired back: N gets them (when
                              sem_refusal found it), entries go; call
                              after publishing their count
  sem_drop(owners, owner)     forget owner's entries in the holders' hash
  sem_nearest(permits, now)   ms until the earliest lease end of a permit
                              out; -1 none (or no lease) ]]
local SEM_NO_EXPIRY = 922337203685477
local SEM_RECLAIM_MAX = 100

local function sem_refusal(n, permits, counter, owners, waiters)
  if not counter_ok(n) then
    -- N is no count (its GET, which counter_seen keeps, failed): a lock?
    if redis.call('type', n).ok == 'hash' and redis.call('pttl', n) ~= -1 then
      return {-1}
    end
    return {-3}
  elseif (permits and not type_ok(permits, 'zset')) or (counter and not counter_ok(counter)) or
         (owners and not type_ok(owners, 'hash')) or
         (waiters and not type_ok(waiters, 'zset')) then
    return {-3}
  end
  return nil
end

local function sem_held_refusal(n, permits, owners, owner, principal, now)
  local refusal = sem_refusal(n, nil, nil, owners)
  if refusal then
    return refusal
  end
  local score = typed_call('zscore', permits, owner)
  if score == nil then
    return {-3}	-- the permits are no zset
  elseif not score or tonumber(score) <= now then
    return {0}
  elseif owners_refused(owners, owner, principal) then
    return {-2, 7, 0}
  end
  return nil, tonumber(score)
end

local function sem_expired(permits, now)
  return typed_call('zrangebyscore', permits, '-inf', now, 'limit', 0, SEM_RECLAIM_MAX)
end

local function sem_drop(owners, owner)
  redis.call('hdel', owners, owner, '#' .. owner, '=' .. owner)
end

local function sem_reclaim(n, permits, owners, expired)
  if #expired == 0 then
    return
  end
  redis.call('zrem', permits, unpack(expired))
  if counter_seen[n] then	-- sem_refusal read N: it has a count
    redis.call('incrby', n, #expired)
  end
  for _, m in ipairs(expired) do
    sem_drop(owners, m)
  end
end

local function sem_nearest(permits, now)
  local v = redis.call('zrange', permits, 0, 0, 'withscores')
  if not v[1] or tonumber(v[2]) >= SEM_NO_EXPIRY then
    return -1
  end
  local left = tonumber(v[2]) - now
  return left > 0 and left or 0
end
