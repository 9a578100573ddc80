--[[ rw_read_acquire.lua -- take or re-enter the read side of a read-write lock.
  KEYS[1] lock hash N                 KEYS[2] fencing counter redisson_lock_token:{N}
  KEYS[3] timeout key prefix {N}: hold k of owner F lives in {N}:F:rwlock_timeout:k
  KEYS[4] waiting writers dlockd_rwlock_writers:{N} (owner -> deadline, Redis ms)
  ARGV[1] lease ms                    ARGV[2] owner field
  Returns {1, token, holds, pttl}  acquired; pttl of N, which lives as long as
                                   its longest hold
          {0, pttl, by_writer}     not acquired: a writer holds it, or (by_writer
                                   = 1) a writer waits and the caller is a new reader
          {-1}                     N is not a read-write lock
  Readers share; the write holder may also read (downgrade). A new reader
  queues behind a live waiting writer, so readers cannot starve writers;
  one already reading may re-enter. ]]
local kind = rw_kind(KEYS[1])
if kind == 'other' then
  return {-1}
end
local owner, lease = ARGV[2], tonumber(ARGV[1])
local mode = redis.call('hget', KEYS[1], 'mode')
local reading = kind == 'rw' and redis.call('hexists', KEYS[1], owner) == 1
local writing = mode == 'write' and redis.call('hexists', KEYS[1], owner .. ':write') == 1
if mode == 'write' and not writing then
  return {0, redis.call('pttl', KEYS[1]), 0}
end
if not reading and not writing then
  redis.call('zremrangebyscore', KEYS[4], '-inf', rw_now())
  if redis.call('zcard', KEYS[4]) > 0 then
    return {0, redis.call('pttl', KEYS[1]), 1}
  end
end
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
local holds = redis.call('hincrby', KEYS[1], owner, 1)
redis.call('set', KEYS[3] .. ':' .. owner .. ':rwlock_timeout:' .. holds, 1, 'px', lease)
local pttl = lease_at_least(KEYS[1], lease)
return {1, next_token(KEYS[2], tonumber(ARGV[1])), holds, pttl}
