--[[ lock_acquire.lua -- take or re-enter an exclusive (Redisson RLock) lock.
  KEYS[1] lock hash N                 KEYS[2] fencing counter redisson_lock_token:{N}
  ARGV[1] lease ms                    ARGV[2] owner field
  Returns {1, token, holds, pttl}  acquired; pttl is the lease now in force
          {0, pttl}                another owner holds it (pttl -1: no expiry)
          {-1}                     N is not an exclusive lock (rwlock hash or other type)
  A re-entry never shortens the lease: it becomes max(remaining, lease). ]]
local kind = redis.call('type', KEYS[1]).ok
if kind ~= 'none' and (kind ~= 'hash' or redis.call('hexists', KEYS[1], 'mode') == 1) then
  return {-1}
end
if kind == 'none' or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local holds = redis.call('hincrby', KEYS[1], ARGV[2], 1)
  local pttl = lease_at_least(KEYS[1], tonumber(ARGV[1]))
  return {1, next_token(KEYS[2], tonumber(ARGV[1])), holds, pttl}
end
return {0, redis.call('pttl', KEYS[1])}
