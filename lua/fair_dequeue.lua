--[[ fair_dequeue.lua -- waiters give up (deadline, hang-up): leave the queue,
  all of one dlockd event loop's leavers of one lock in one call.
  libs: common fair
  KEYS[1] queue redisson_lock_queue:{N}
  KEYS[2] deadlines redisson_lock_timeout:{N}
  KEYS[3] channel prefix redisson_lock__channel:{N}
  ARGV[1] the owners leaving, each as <length>:<owner>, one after the other
          ("3:ci-2:abc" is ci-2 then abc): one argument however many
  Returns how many of them were queued (0 too when the queue is not a
  queue: left untouched). When the head leaves, the next waiter that is
  not leaving is told (before anything is written), so nobody waits
  behind an empty place. The queue is walked once whatever the number of
  leavers (one LREM for one or two of them, else one LRANGE and a
  rewrite), so a crowd hanging up costs one script per few hundred of
  them, each bounded by the queue's length, itself capped by dlockd
  (--max-fair-queue). ]]
local listed = unpack_list(ARGV[1])
if not listed then
  return redis.error_reply('DLOCKD_ARGS malformed owner list')
end
if not type_ok(KEYS[1], 'list') or not type_ok(KEYS[2], 'zset') then
  return 0
end
local leaving = {}
for i = 1, #listed do
  leaving[listed[i]] = true
end
local now = now_ms()
local first = redis.call('lindex', KEYS[1], 0)
local was_head = first and leaving[first]
if was_head then
  fair_notify(KEYS[3], (fair_head(KEYS[1], KEYS[2], now, leaving)))
end
local removed = 0
local CHUNK = 500		-- owners per ZREM / RPUSH (Lua's stack is small)
for at = 1, #listed, CHUNK do
  removed = removed + redis.call('zrem', KEYS[2], unpack(listed, at, math.min(at + CHUNK - 1, #listed)))
end
if #listed <= 2 then
  for i = 1, #listed do
    redis.call('lrem', KEYS[1], 0, listed[i])
  end
else
  local all, keep = redis.call('lrange', KEYS[1], 0, -1), {}
  for i = 1, #all do
    if not leaving[all[i]] then
      keep[#keep + 1] = all[i]
    end
  end
  if #keep < #all then
    redis.call('del', KEYS[1])
    for at = 1, #keep, CHUNK do
      redis.call('rpush', KEYS[1], unpack(keep, at, math.min(at + CHUNK - 1, #keep)))
    end
  end
end
if was_head then
  fair_purge(KEYS[1], KEYS[2], now)
end
return removed
