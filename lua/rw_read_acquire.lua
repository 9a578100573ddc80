--[[ rw_read_acquire.lua -- take the read side of a read-write lock, or
  repeat or re-enter the caller's read holding.
  libs: common rw
  KEYS[1] lock hash N                 KEYS[2] fencing counter redisson_lock_token:{N}
  KEYS[3] timeout key prefix {N}: hold k of owner F lives in {N}:F:rwlock_timeout:k
  KEYS[4] waiting writers dlockd_rwlock_writers:{N} (owner -> deadline, Redis ms)
  KEYS[5] holders dlockd_lock_owners:{N}
  KEYS[6] watchers' channel dlockd_lock_state:{N}: a new read holding
          publishes 'acquired' there (a refusal of the channel is let be)
  ARGV[1] lease ms                    ARGV[2] owner field
  ARGV[3] (unused: readers take no queue place)
  ARGV[4] "1": a re-entry counts a hold (a new read hold with its own
          lease); "0": it is a repeat: every read hold of the owner lasts
          at least lease ms more, and none is added
  ARGV[5] the caller's token name (principal); "" with auth off
  ARGV[6] the most live read holds one owner may have on N
  ARGV[7] the most live read holds N may have, all readers' (Redisson's
          included)
  ARGV[8] "1": ARGV[9] is the holder value to keep; "0": none given
  ARGV[10] the lease never runs past this (Redis' clock, ms: a session's
          end); "0": no bound
  Returns {1, token, holds, pttl, added, change}
                                   held; token is the read holding's (the
                                   same while the owner reads); pttl of N,
                                   which lives as long as its longest hold;
                                   added 0 for a repeat; change for
                                   rw_undo.lua
          {0, pttl, 0, why, 0}     not acquired: why 5, a writer holds it; why
                                   2, a writer waits and the caller is a new
                                   reader
          {-2, 7, 0}               the owner reads (or writes) N under another
                                   token name
          {-4, scope, n}           a hold would be added past a cap: scope 1,
                                   the owner has n live read holds (ARGV[6]);
                                   scope 2, N has n (ARGV[7]); no hold is
                                   written (expired holds, and waiting
                                   writers' lapsed places, are dropped, as
                                   by any call)
          {-1}                     N is a lock or fair lock
          {-3}                     N (or a key of its own) holds something that
                                   is not a lock's; nothing is written
  Readers share; the write holder may also read (downgrade): its first read
  is a holding of its own (field <owner>, token of its own). A new reader
  queues behind a live waiting writer, so readers cannot starve writers;
  one already reading may re-enter. Expired read holds are dropped first.
  The caps keep what one client can pile up on N, and so what every call
  on N costs Redis (one PTTL per hold), bounded. ]]
local owner, lease, principal = ARGV[2], bounded_lease(ARGV[1], ARGV[10]), ARGV[5]
local refusal, kind, fields = acquire_refusal(KEYS[1], 'rw', owner, KEYS[2], KEYS[4], 'zset')
-- a free lock nobody waits to write: the holders' hash is checked by the
-- grant's first write (owners_open)
local open = kind == 'none' and type_seen[KEYS[4]] == 'none'
if refusal then
  return refusal
elseif not owners_ok(KEYS[5], open and 'none' or kind) then
  return {-3}
end
local total, held = 0, {}
if kind == 'rw' then
  local s = rw_scan(KEYS[1], KEYS[3], fields)
  kind = rw_purge(KEYS[1], KEYS[3], KEYS[5], s)
  total, held = rw_live(s)
end
-- the purge keeps the mode and the writer of a lock it keeps, and the
-- field of each reader with a live hold
local mode = kind == 'rw' and field_of(fields, 'mode')
local reading = (held[owner] or 0) > 0
local writing = mode == 'write' and field_of(fields, owner .. ':write') ~= nil
if mode == 'write' and not writing then
  return {0, redis.call('pttl', KEYS[1]), 0, 5, 0}
end
if (reading and owners_refused(KEYS[5], owner, principal)) or
   (writing and owners_refused(KEYS[5], owner .. ':write', principal)) then
  return {-2, 7, 0}
end
if not reading and not writing and type_seen[KEYS[4]] ~= 'none' then
  redis.call('zremrangebyscore', KEYS[4], '-inf', now_ms())
  if redis.call('zcard', KEYS[4]) > 0 then
    return {0, redis.call('pttl', KEYS[1]), 0, 2, 0}
  end
end
if not reading or ARGV[4] == '1' then
  -- a hold is to be added
  local mine = held[owner] or 0
  if mine >= tonumber(ARGV[6]) then
    return {-4, 1, mine}
  elseif total >= tonumber(ARGV[7]) then
    return {-4, 2, total}
  end
end
-- what an undo of this change needs (lib/common.lua): N's lease end, the
-- owner's write holding's change number, each read hold's end for a repeat
local now, record = now_ms(), {0, 0}
if mode then
  record[1] = now + redis.call('pttl', KEYS[1])
end
if writing then
  record[2] = owners_change(KEYS[5], owner .. ':write') or 0
end
-- sole: a lock nobody held has no other holding the counter must outlive
local grant = {counter = KEYS[2], lease = lease, principal = principal, given = ARGV[8],
               value = ARGV[9], record = '1 0 0', fresh = not reading, sole = not mode}
if open and not owners_open(KEYS[5], owner, grant) then
  return {-3}	-- the holders' hash is not a hash: nothing written
end
local base = KEYS[3] .. ':' .. owner .. ':rwlock_timeout:'
local holds, added
if reading and ARGV[4] ~= '1' then
  holds, added = held[owner], 0	-- the purge numbered them 1..n
  for k = 1, holds do
    local key = string.format('%s%d', base, k)
    local pttl = redis.call('pttl', key)
    record[#record + 1] = pttl > 0 and now + pttl or 0
    lease_at_least(key, lease)
  end
else
  if mode then
    holds = redis.call('hincrby', KEYS[1], owner, '1')
  else
    holds = 1	-- a new hash: the mode and the reader in one HSET
    redis.call('hset', KEYS[1], 'mode', 'read', owner, '1')
  end
  added = 1
  redis.call('set', string.format('%s%d', base, holds), '1', 'px', ms(lease))
end
-- a new hash has no lease yet (-1)
local pttl = lease_at_least(KEYS[1], lease, not mode and -1 or nil)
for i = 1, #record do
  record[i] = string.format('%d', record[i])
end
grant.record, grant.pttl = string.format('%d %s', added, table.concat(record, ' ')), pttl
local token, change = owners_grant(KEYS[5], KEYS[1], owner, grant)
if holds == 1 and added == 1 then
  redis.pcall(PUBLISH, KEYS[6], 'acquired')
end
return {1, token, holds, pttl, added, change}
