--[[ lock_status.lua -- read the state of an exclusive lock.
  KEYS[1] lock hash N
  ARGV[1] owner field, or "" for none
  Returns {locked, pttl, holds}  locked 1/0; pttl of N (-2 absent); holds of
                                 ARGV[1] (0 when not given)
          {-1}                   N is a read-write lock
          {-3}                   N holds something that is not a lock ]]
local kind = lock_kind(KEYS[1])
if kind == 'none' then
  return {0, -2, 0}
elseif kind == 'rw' then
  return {-1}
elseif kind == 'other' then
  return {-3}
end
local holds = 0
if ARGV[1] ~= '' then
  holds = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
end
return {1, redis.call('pttl', KEYS[1]), holds}
