--[[ sem_force_release.lua -- give back every permit of a semaphore, whoever
  holds it (dlockd's and Redisson's): an admin's.
  libs: common sem
  flags: allow-oom
  KEYS[1] count N                     KEYS[2] permits {N}:timeout
  KEYS[3] channel redisson_sc:{N}     KEYS[4] holders dlockd_lock_owners:{N}
  Returns 1 permits were out (their count published), 0 none was,
          -1 N is a lock, -3 a key holds something that is not a semaphore's
  The limit stays as it was. ]]
local refusal = sem_refusal(KEYS[1], KEYS[2], nil, KEYS[4])
if refusal then
  return refusal[1]
end
local now = now_ms()
local out = redis.call('zcount', KEYS[2], '(' .. now, '+inf')
local all = redis.call('zcard', KEYS[2])
if all == 0 then
  return 0
end
redis.call(PUBLISH, KEYS[3], tostring(all))
if redis.call('exists', KEYS[1]) == 1 then
  redis.call('incrby', KEYS[1], all)
end
redis.call('del', KEYS[2], KEYS[4])
return out > 0 and 1 or 0
