--[[ sem_release.lua -- give back the caller's permit of a semaphore.
  libs: common sem
  flags: allow-oom
  KEYS[1] count N                     KEYS[2] permits {N}:timeout
  KEYS[3] channel redisson_sc:{N}     KEYS[4] holders dlockd_lock_owners:{N}
  ARGV[1] owner                       ARGV[2] the caller's token name ("": auth off)
  Returns {1, 0}       released, and "<n>" published: the permits that came
                        back (this one and any past their lease end)
          {0}           the owner holds no permit (never taken, released,
                        lease over)
          {-2, 7, 0}    the owner holds it under another token name
          {-1}          N is a lock
          {-3}          a key holds something that is not a semaphore's
  The semaphore's watchers listen on KEYS[3] too: "<n>" tells them the
  permit went. ]]
local owner = ARGV[1]
local now = now_ms()
local refusal, score = sem_held_refusal(KEYS[1], KEYS[2], KEYS[4], owner, ARGV[2], now)
if refusal then
  return refusal
end
local expired = sem_expired(KEYS[2], now)
redis.call(PUBLISH, KEYS[3], string.format('%d', #expired + 1))
sem_reclaim(KEYS[1], KEYS[2], KEYS[4], expired)
redis.call('zrem', KEYS[2], owner)
if counter_seen[KEYS[1]] then	-- sem_refusal read N: it has a count
  redis.call('incrby', KEYS[1], '1')
end
sem_drop(KEYS[4], owner)
return {1, 0}
