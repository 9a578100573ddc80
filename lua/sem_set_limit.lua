--[[ sem_set_limit.lua -- set the limit of a semaphore (Redisson's
  setPermits): the free count moves by the difference; permits out stay
  out (fewer than are out leaves none free until enough come back).
  libs: common sem
  KEYS[1] count N                     KEYS[2] permits {N}:timeout
  KEYS[3] channel redisson_sc:{N}     KEYS[4] holders dlockd_lock_owners:{N}
  ARGV[1] the new limit
  Returns {1, limit, free, before}  free: the limit less the permits live;
                                    before: the limit that was in force (0:
                                    none); a raise publishes how many came
          {-1}  N is a lock
          {-3}  a key holds something that is not a semaphore's ]]
local limit = tonumber(ARGV[1])
local refusal = sem_refusal(KEYS[1], KEYS[2], nil, KEYS[4])
if refusal then
  return refusal
end
local now = now_ms()
local expired = sem_expired(KEYS[2], now)
local out = redis.call('zcard', KEYS[2]) - #expired
local free = redis.call('get', KEYS[1])
local before = 0
if free then
  before = tonumber(free) + #expired + out
end
-- the permits still live: past SEM_RECLAIM_MAX expired ones, those not
-- taken back now are out in N's count (the next calls take them back)
-- but none is live: the answer's free count is the limit less the live
local live = out
if #expired == SEM_RECLAIM_MAX then
  live = redis.call('zcount', KEYS[2], string.format('(%d', now), '+inf')
end
local raised = limit - out - (free and tonumber(free) or 0)
if raised > 0 then
  redis.call(PUBLISH, KEYS[3], string.format('%d', raised))
end
sem_reclaim(KEYS[1], KEYS[2], KEYS[4], expired)
redis.call('set', KEYS[1], string.format('%d', limit - out))
return {1, limit, limit - live, before}
