--[[ lock_release.lua -- release one hold of an exclusive lock.
  libs: common
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] channel redisson_lock__channel:{N}
  KEYS[3] holders dlockd_lock_owners:{N}
  ARGV[1] owner field                 ARGV[2] the caller's token name ("": auth off)
  Returns {1, holds}  one hold released; holds = 0 means the lock is free and
                      "0" was published so one waiter wakes
          {0}         nobody holds N (never taken, released, or lease expired)
          {-2}        another owner holds N
          {-2, 7, 0}  the owner holds N under another token name
          {-1}        N is a read-write lock
          {-3}        N (or its holders' hash) holds something that is not a
                      lock's
  A partial release keeps the remaining lease. The lock's watchers listen
  on KEYS[2] too: its "0" tells them the holding ended. ]]
local refusal, fields = held_refusal(KEYS[1], 'lock', ARGV[1], KEYS[3])
if refusal then
  return refusal
end
local holds = field_of(fields, ARGV[1])
if not holds then
  return {-2}
elseif owners_refused(KEYS[3], ARGV[1], ARGV[2]) then
  return {-2, 7, 0}
end
holds = holds - 1	-- a count (lock_kind): digits
if holds > 0 then
  redis.call('hincrby', KEYS[1], ARGV[1], '-1')
  owners_bump(KEYS[3], ARGV[1])
  owners_sync(KEYS[3], KEYS[1])
  return {1, holds}
end
redis.call(PUBLISH, KEYS[2], '0')
redis.call('del', KEYS[1], KEYS[3])
return {1, 0}
