--[[ lock_acquire.lua -- take an exclusive (Redisson RLock) lock, or repeat
  or re-enter the caller's holding of it.
  libs: common
  KEYS[1] lock hash N                 KEYS[2] fencing counter redisson_lock_token:{N}
  KEYS[3] holders dlockd_lock_owners:{N}
  KEYS[4] watchers' channel dlockd_lock_state:{N}: a new holding publishes
          'acquired' there (a refusal of the channel, by the ACL, is let be:
          watchers then see it at their wait_ms)
  ARGV[1] lease ms                    ARGV[2] owner field
  ARGV[3] queue place life (unused: a plain lock has no queue)
  ARGV[4] "1": a re-entry counts a hold (Redisson's RLock); "0": it is a
          repeat of the same acquire and changes no hold
  ARGV[5] the caller's token name (principal); "" with auth off
  ARGV[6], ARGV[7] (unused: read holds' caps)
  ARGV[8] "1": ARGV[9] is the holder value to keep; "0": none given
  ARGV[10] the lease never runs past this (Redis' clock, ms: a session's
          end); "0": no bound
  Returns {1, token, holds, pttl, added, change}
                                   held; token is the holding's, the same for
                                   every repeat and re-entry while it lasts;
                                   pttl is the lease now in force; added 1 when
                                   a hold was added (a new holding, or a
                                   counted re-entry), 0 for a repeat; change
                                   numbers this change of the holding, for
                                   lock_undo.lua (recorded with what it needs:
                                   lib/common.lua)
          {0, pttl, 0, 0, 0}       another owner holds it
          {-2, 7, 0}               the owner holds it under another token name:
                                   nothing is written
          {-1}                     N is a read-write lock
          {-3}                     N (or its counter or holders' hash) holds
                                   something that is not a lock's; nothing is
                                   written (the counter and holders' hash are
                                   looked at only when the caller may hold
                                   N: a lock another owner holds is {0},
                                   and its refusal writes nothing)
  A repeat or re-entry never shortens the lease: it becomes
  max(remaining, lease). ]]
local owner, lease, principal = ARGV[2], bounded_lease(ARGV[1], ARGV[10]), ARGV[5]
local refusal, kind, fields, left = acquire_refusal(KEYS[1], 'lock', owner)
if refusal then
  return refusal
end
local fresh = kind == 'none'
if not fresh and not field_of(fields, owner) then
  return {0, left, 0, 0, 0}	-- a waiter's retry: two reads, no more
elseif not counter_ok(KEYS[2]) or not owners_ok(KEYS[3], kind) then
  return {-3}
elseif not fresh and owners_refused(KEYS[3], owner, principal) then
  return {-2, 7, 0}
end
local before = 0
if not fresh then
  before = now_ms() + left
end
-- sole: a free lock has no other holding the counter must outlive
local grant = {counter = KEYS[2], lease = lease, principal = principal, given = ARGV[8],
               value = ARGV[9], fresh = fresh, sole = fresh}
if fresh then
  grant.record = '1 0 0'
  if not owners_open(KEYS[3], owner, grant) then
    return {-3}	-- the holders' hash is not a hash: nothing written
  end
end
local holds, added
if fresh or ARGV[4] == '1' then
  holds, added = redis.call('hincrby', KEYS[1], owner, '1'), 1
else
  holds, added = tonumber(field_of(fields, owner)), 0
end
local pttl = lease
if fresh then
  redis.call('pexpire', KEYS[1], ms(lease))	-- a new hash: no lease yet
else
  pttl = lease_at_least(KEYS[1], lease, left)
end
grant.record = grant.record or string.format('%d %d 0', added, before)
grant.pttl = pttl
local token, change = owners_grant(KEYS[3], KEYS[1], owner, grant)
if holds == 1 and added == 1 then
  redis.pcall(PUBLISH, KEYS[4], 'acquired')
end
return {1, token, holds, pttl, added, change}
