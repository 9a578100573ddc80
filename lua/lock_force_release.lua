--[[ lock_force_release.lua -- free an exclusive lock whoever holds it.
  libs: common
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] channel redisson_lock__channel:{N}
  KEYS[3] holders dlockd_lock_owners:{N}
  Returns 1   it was held and is now free; "0" was published
          0   nobody held it
          -1  N is a read-write lock (left untouched)
          -3  N (or its holders' hash) holds something that is not a lock's
              (left untouched) ]]
local kind = lock_kind(KEYS[1])
if kind == 'none' then
  return 0
elseif kind == 'rw' then
  return -1
elseif kind == 'other' or not type_ok(KEYS[3], 'hash') then
  return -3
end
redis.call(PUBLISH, KEYS[2], '0')
redis.call('del', KEYS[1], KEYS[3])
return 1
