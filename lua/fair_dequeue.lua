--[[ fair_dequeue.lua -- a waiter gives up (deadline, hang-up): leave the queue.
  libs: common fair
  KEYS[1] queue redisson_lock_queue:{N}
  KEYS[2] deadlines redisson_lock_timeout:{N}
  KEYS[3] channel prefix redisson_lock__channel:{N}
  ARGV[1] owner field
  Returns 1 if it was queued, 0 if not (or the queue is not a queue: left
  untouched). When it was the head, the next waiter is told (before
  anything is written), so nobody waits behind an empty place. ]]
if not type_ok(KEYS[1], 'list') or not type_ok(KEYS[2], 'zset') then
  return 0
end
local now = now_ms()
local was_head = redis.call('lindex', KEYS[1], 0) == ARGV[1]
if was_head then
  fair_notify(KEYS[3], (fair_head(KEYS[1], KEYS[2], now, ARGV[1])))
end
local removed = redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
if was_head then
  fair_purge(KEYS[1], KEYS[2], now)
end
return removed
