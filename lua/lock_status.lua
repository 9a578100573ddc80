--[[ lock_status.lua -- read the state of an exclusive lock.
  KEYS[1] lock hash N
  ARGV[1] owner field, or "" for none
  Returns {locked, pttl, holds}  locked 1/0; pttl of N (-2 absent, -1 no
                                 expiry); holds of ARGV[1] (0 when not given)
          {-1}                   N is not an exclusive lock ]]
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {0, -2, 0}
end
if kind ~= 'hash' or redis.call('hexists', KEYS[1], 'mode') == 1 then
  return {-1}
end
local holds = 0
if ARGV[1] ~= '' then
  holds = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
end
return {1, redis.call('pttl', KEYS[1]), holds}
