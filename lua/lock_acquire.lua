--[[ lock_acquire.lua -- take or re-enter an exclusive (Redisson RLock) lock.
  KEYS[1] lock hash N                 KEYS[2] fencing counter redisson_lock_token:{N}
  ARGV[1] lease ms                    ARGV[2] owner field
  Returns {1, token, holds, pttl}  acquired; pttl is the lease now in force
          {0, pttl, 0, 0, 0}       another owner holds it
          {-1}                     N is a read-write lock
          {-3}                     N (or its counter) holds something that is
                                   not a lock; nothing is written
  A re-entry never shortens the lease: it becomes max(remaining, lease). ]]
if not owner_ok(ARGV[2]) then
  return redis.error_reply('DLOCKD_OWNER owner is a field of the layout')
end
local kind = lock_kind(KEYS[1])
if kind == 'rw' then
  return {-1}
elseif kind == 'other' or not counter_ok(KEYS[2]) then
  return {-3}
end
if kind == 'none' or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local pttl = lease_at_least(KEYS[1], tonumber(ARGV[1]))
  return {1, next_token(KEYS[2], tonumber(ARGV[1])), holds, pttl}
end
return {0, redis.call('pttl', KEYS[1]), 0, 0, 0}
