--[[ rw_write_dequeue.lua -- waiting writers give up: stop holding back
  readers, all of one dlockd event loop's leavers of one lock in one call.
  libs: common
  KEYS[1] waiting writers dlockd_rwlock_writers:{N}
  KEYS[2] channel redisson_rwlock:{N}
  ARGV[1] the owners leaving, each as <length>:<owner>, one after the other
          ("3:ci-2:abc" is ci-2 then abc): one argument however many
  Returns how many of them were registered (0 too when the key is not a
  zset: left untouched). When no writer waits any more, "1" wakes the
  readers that queued behind them. ]]
local listed = unpack_list(ARGV[1])
if not listed then
  return redis.error_reply('DLOCKD_ARGS malformed owner list')
end
if not type_ok(KEYS[1], 'zset') then
  return 0
end
local removed = 0
local CHUNK = 500		-- owners per ZREM (Lua's stack is small)
for at = 1, #listed, CHUNK do
  removed = removed + redis.call('zrem', KEYS[1], unpack(listed, at, math.min(at + CHUNK - 1, #listed)))
end
if removed > 0 and redis.call('zcard', KEYS[1]) == 0 then
  redis.call(PUBLISH, KEYS[2], '1')
end
return removed
