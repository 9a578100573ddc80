--[[ rw_write_acquire.lua -- take the write side of a read-write lock, or
  repeat or re-enter the caller's write holding.
  libs: common rw
  KEYS[1] lock hash N                 KEYS[2] fencing counter redisson_lock_token:{N}
  KEYS[3] timeout key prefix {N}      KEYS[4] waiting writers dlockd_rwlock_writers:{N}
  KEYS[5] holders dlockd_lock_owners:{N}
  KEYS[6] watchers' channel dlockd_lock_state:{N}: a new write holding
          publishes 'acquired' there (a refusal of the channel is let be)
  ARGV[1] lease ms                    ARGV[2] owner field (the writer field is
                                      <owner>:write)
  ARGV[3] waiting-writer entry lifetime ms; "0" = try once, do not register
  ARGV[4] "1": a re-entry counts a hold; "0": it is a repeat, no hold added
  ARGV[5] the caller's token name (principal); "" with auth off
  ARGV[6] the most live waiting writers N may have (--max-fair-queue): a
          caller without a live registration is not added past it
  ARGV[7] (unused: read holds' caps)
  ARGV[8] "1": ARGV[9] is the holder value to keep; "0": none given
  ARGV[10] the lease never runs past this (Redis' clock, ms: a session's
          end); "0": no bound
  Returns {1, token, holds, pttl, added, change}
                                   held; token is the write holding's (the
                                   same while the owner writes); added 0 for
                                   a repeat; change for rw_undo.lua
          {0, pttl, 0, why, n}     not acquired; the caller is registered as a
                                   waiting writer (refreshed by calling again).
                                   why 5: another writer holds it; why 3: n
                                   readers hold it; why 4: the caller reads,
                                   and so do n other readers
          {-2, 7, 0}               the owner writes N (or, upgrading, reads it)
                                   under another token name
          {-1}                     N is a lock or fair lock
          {-3}                     N (or a key of its own) holds something that
                                   is not a lock's; nothing is written
          {-5, n}                  the caller would wait, but n live writers
                                   (ARGV[6] or more) wait already: it is not
                                   registered (expired read holds may be dropped)
  Upgrade: the only reader may take the write lock (Redisson deadlocks
  there): a holding of its own (field <owner>:write, token of its own).
  A repeat or re-entry never shortens the lease. Expired read holds are
  dropped first. ]]
local owner, lease, principal = ARGV[2], bounded_lease(ARGV[1], ARGV[10]), ARGV[5]
local refusal, kind, fields = acquire_refusal(KEYS[1], 'rw', owner, KEYS[2], KEYS[4], 'zset')
if refusal then
  return refusal
elseif not owners_ok(KEYS[5], kind) then
  return {-3}
end
local wf = owner .. ':write'
-- sole: a lock nobody held has no other holding the counter must outlive
local grant = {counter = KEYS[2], lease = lease, principal = principal, given = ARGV[8],
               value = ARGV[9], record = '1 0 0'}
if kind == 'none' and not owners_open(KEYS[5], wf, grant) then
  return {-3}	-- the holders' hash is not a hash: nothing written
end
if kind == 'rw' then
  kind = rw_purge(KEYS[1], KEYS[3], KEYS[5], rw_scan(KEYS[1], KEYS[3], fields))
end
-- the purge keeps the mode, and every writer field, of a lock it keeps
local mode = kind == 'rw' and field_of(fields, 'mode')
local holds, added, fresh = 1, 1, true
-- N's pttl, after the purge (a new hash has no lease yet: -1)
local left = mode and redis.call('pttl', KEYS[1]) or -1
local before = 0
if mode then
  before = now_ms() + left
end
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'write', wf, '1')
elseif mode == 'write' and field_of(fields, wf) then
  if owners_refused(KEYS[5], wf, principal) then
    return {-2, 7, 0}
  end
  fresh = false
  if ARGV[4] == '1' then
    holds = redis.call('hincrby', KEYS[1], wf, '1')
  else
    holds, added = tonumber(field_of(fields, wf)), 0
  end
elseif mode == 'read' and redis.call('hlen', KEYS[1]) == 2 and
       redis.call('hexists', KEYS[1], owner) == 1 then
  if owners_refused(KEYS[5], owner, principal) then
    return {-2, 7, 0}
  end
  redis.call('hset', KEYS[1], 'mode', 'write', wf, '1')
else
  local life, now = tonumber(ARGV[3]), now_ms()
  local mine = redis.call('zscore', KEYS[4], owner)
  if life > 0 and not (mine and tonumber(mine) > now) then
    -- every waiting writer retries on its own: cap them (a registration
    -- whose lifetime passed counts as none)
    local live = redis.call('zcount', KEYS[4], '(' .. now, '+inf')
    if live >= tonumber(ARGV[6]) then
      return {-5, live}
    end
  end
  if life > 0 then
    redis.call('zadd', KEYS[4], now + life, owner)
  end
  local why, n = 5, 0
  if mode == 'read' then
    n = rw_readers(KEYS[1])
    why = 3
    if redis.call('hexists', KEYS[1], owner) == 1 then
      why, n = 4, n - 1
    end
  end
  return {0, left, 0, why, n}
end
if type_seen[KEYS[4]] ~= 'none' then
  redis.call('zrem', KEYS[4], owner)	-- its place as a waiting writer, if it had one
end
local pttl = lease_at_least(KEYS[1], lease, left)
grant.record, grant.fresh, grant.sole, grant.pttl =
  string.format('%d %d 0', added, before), fresh, not mode, pttl
local token, change = owners_grant(KEYS[5], KEYS[1], wf, grant)
if holds == 1 and added == 1 then
  redis.pcall(PUBLISH, KEYS[6], 'acquired')
end
return {1, token, holds, pttl, added, change}
