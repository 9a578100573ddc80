--[[ sem_dequeue.lua -- a semaphore's waiter leaves unserved: drop its place
  (places only count the waiting; the permits are not queued).
  libs: common
  KEYS[1] waiting owners dlockd_sem_waiters:{N}
  ARGV[1] owner
  Returns 1 ]]
if type_ok(KEYS[1], 'zset') then
  redis.call('zrem', KEYS[1], ARGV[1])
end
return 1
