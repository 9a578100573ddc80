--[[ rw_write_acquire.lua -- take or re-enter the write side of a read-write lock.
  KEYS[1] lock hash N                 KEYS[2] fencing counter redisson_lock_token:{N}
  KEYS[3] timeout key prefix {N}      KEYS[4] waiting writers dlockd_rwlock_writers:{N}
  ARGV[1] lease ms                    ARGV[2] owner field (the writer field is
                                      <owner>:write)
  ARGV[3] waiting-writer entry lifetime ms; "0" = try once, do not register
  Returns {1, token, holds, pttl}  acquired
          {0, pttl, 0, why, n}     not acquired; the caller is registered as a
                                   waiting writer (refreshed by calling again).
                                   why 5: another writer holds it; why 3: n
                                   readers hold it; why 4: the caller reads,
                                   and so do n other readers
          {-1}                     N is a lock or fair lock
          {-3}                     N (or a key of its own) holds something that
                                   is not a lock; nothing is written
  Upgrade: the only reader may take the write lock (Redisson deadlocks there).
  A re-entry never shortens the lease. Expired read holds are dropped first. ]]
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
  rw_purge(KEYS[1], KEYS[3])
end
local wf = owner .. ':write'
local mode = redis.call('hget', KEYS[1], 'mode')
local holds
if not mode then
  redis.call('hset', KEYS[1], 'mode', 'write', wf, 1)
  holds = 1
elseif mode == 'write' and redis.call('hexists', KEYS[1], wf) == 1 then
  holds = redis.call('hincrby', KEYS[1], wf, 1)
elseif mode == 'read' and redis.call('hlen', KEYS[1]) == 2 and
       redis.call('hexists', KEYS[1], owner) == 1 then
  redis.call('hset', KEYS[1], 'mode', 'write', wf, 1)
  holds = 1
else
  local life = tonumber(ARGV[3])
  if life > 0 then
    redis.call('zadd', KEYS[4], rw_now() + life, owner)
  end
  local why, n = 5, 0
  if mode == 'read' then
    n = rw_readers(KEYS[1])
    why = 3
    if redis.call('hexists', KEYS[1], owner) == 1 then
      why, n = 4, n - 1
    end
  end
  return {0, redis.call('pttl', KEYS[1]), 0, why, n}
end
redis.call('zrem', KEYS[4], owner)
local pttl = lease_at_least(KEYS[1], lease)
return {1, next_token(KEYS[2], tonumber(ARGV[1])), holds, pttl}
