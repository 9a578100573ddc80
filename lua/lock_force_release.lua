--[[ lock_force_release.lua -- free an exclusive lock whoever holds it.
  KEYS[1] lock hash N                 KEYS[2] channel redisson_lock__channel:{N}
  Returns 1   it was held and is now free; "0" was published
          0   nobody held it
          -1  N is not an exclusive lock (left untouched) ]]
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return 0
end
if kind ~= 'hash' or redis.call('hexists', KEYS[1], 'mode') == 1 then
  return -1
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '0')
return 1
