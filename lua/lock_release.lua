--[[ lock_release.lua -- release one hold of an exclusive lock.
  KEYS[1] lock hash N                 KEYS[2] channel redisson_lock__channel:{N}
  ARGV[1] owner field
  Returns {1, holds}  one hold released; holds = 0 means the lock is free and
                      "0" was published so one waiter wakes
          {0}         nobody holds N (never taken, released, or lease expired)
          {-2}        another owner holds N
          {-1}        N is not an exclusive lock
  A partial release keeps the remaining lease. ]]
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {0}
end
if kind ~= 'hash' or redis.call('hexists', KEYS[1], 'mode') == 1 then
  return {-1}
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return {-2}
end
local holds = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if holds > 0 then
  return {1, holds}
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '0')
return {1, 0}
