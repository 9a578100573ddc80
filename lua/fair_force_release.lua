--[[ fair_force_release.lua -- free a fair lock whoever holds it.
  libs: common fair
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] queue redisson_lock_queue:{N}
  KEYS[3] deadlines redisson_lock_timeout:{N}
  KEYS[4] channel prefix redisson_lock__channel:{N}
  KEYS[5] holders dlockd_lock_owners:{N}
  Returns 1   it was held and is now free; the queue head was told (nobody
              queued: the plain lock's channel KEYS[4])
          0   nobody held it
          -1  N is a read-write lock (left untouched)
          -3  N, its queue or its holders' hash holds something that is not a
              lock's (left untouched) ]]
local kind = lock_kind(KEYS[1])
if kind == 'rw' then
  return -1
elseif kind == 'other' or not type_ok(KEYS[2], 'list') or not type_ok(KEYS[3], 'zset') or
       not type_ok(KEYS[5], 'hash') then
  return -3
end
local head, at = fair_head(KEYS[2], KEYS[3], now_ms())
if kind ~= 'none' then
  fair_freed(KEYS[4], head)
end
fair_purge(KEYS[2], KEYS[3], nil, at)
if kind == 'none' then
  return 0
end
redis.call('del', KEYS[1], KEYS[5])
return 1
