--[[ rw_write_dequeue.lua -- a waiting writer gives up: stop holding back readers.
  libs: common
  KEYS[1] waiting writers dlockd_rwlock_writers:{N}
  KEYS[2] channel redisson_rwlock:{N}
  ARGV[1] owner field
  Returns 1 if it was registered, 0 if not (or the key is not a zset: left
  untouched). When no writer waits any more, "1" wakes the readers that
  queued behind it. ]]
if not type_ok(KEYS[1], 'zset') then
  return 0
end
if redis.call('zscore', KEYS[1], ARGV[1]) and redis.call('zcard', KEYS[1]) == 1 then
  redis.call(PUBLISH, KEYS[2], '1')
end
return redis.call('zrem', KEYS[1], ARGV[1])
