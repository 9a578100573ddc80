--[[ rw_read_acquire.lua -- take or re-enter the read side of a read-write lock.
  KEYS[1] lock hash N                 KEYS[2] fencing counter redisson_lock_token:{N}
  KEYS[3] timeout key prefix {N}: hold k of owner F lives in {N}:F:rwlock_timeout:k
  KEYS[4] waiting writers dlockd_rwlock_writers:{N} (owner -> deadline, Redis ms)
  ARGV[1] lease ms                    ARGV[2] owner field
  Returns {1, token, holds, pttl}  acquired; pttl of N, which lives as long as
                                   its longest hold
          {0, pttl, 0, why, 0}     not acquired: why 5, a writer holds it; why
                                   2, a writer waits and the caller is a new
                                   reader
          {-1}                     N is a lock or fair lock
          {-3}                     N (or a key of its own) holds something that
                                   is not a lock; nothing is written
  Readers share; the write holder may also read (downgrade). A new reader
  queues behind a live waiting writer, so readers cannot starve writers;
  one already reading may re-enter. Expired read holds are dropped first. ]]
local owner, lease = ARGV[2], tonumber(ARGV[1])
if not owner_ok(owner) then
  return redis.error_reply('DLOCKD_OWNER owner is a field of the layout')
end
local kind = lock_kind(KEYS[1])
if kind == 'lock' then
  return {-1}
elseif kind == 'other' or not counter_ok(KEYS[2]) or not type_ok(KEYS[4], 'zset') then
  return {-3}
end
if kind == 'rw' then
  kind = rw_purge(KEYS[1], KEYS[3])
end
local mode = redis.call('hget', KEYS[1], 'mode')
local reading = kind == 'rw' and redis.call('hexists', KEYS[1], owner) == 1
local writing = mode == 'write' and redis.call('hexists', KEYS[1], owner .. ':write') == 1
if mode == 'write' and not writing then
  return {0, redis.call('pttl', KEYS[1]), 0, 5, 0}
end
if not reading and not writing then
  redis.call('zremrangebyscore', KEYS[4], '-inf', rw_now())
  if redis.call('zcard', KEYS[4]) > 0 then
    return {0, redis.call('pttl', KEYS[1]), 0, 2, 0}
  end
end
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'read')
end
local holds = redis.call('hincrby', KEYS[1], owner, 1)
redis.call('set', KEYS[3] .. ':' .. owner .. ':rwlock_timeout:' .. holds, 1, 'px', lease)
local pttl = lease_at_least(KEYS[1], lease)
return {1, next_token(KEYS[2], tonumber(ARGV[1])), holds, pttl}
