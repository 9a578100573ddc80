--[[ sem_dequeue.lua -- a semaphore's waiters leave unserved (deadline,
  hang-up): drop their places (places only count the waiting; the permits
  are not queued). All of one dlockd event loop's leavers of one semaphore
  in one call.
  libs: common
  flags: allow-oom
  KEYS[1] waiting owners dlockd_sem_waiters:{N}
  ARGV[1] the owners leaving, each as <length>:<owner>, one after the other
          ("3:ci-2:abc" is ci-2 then abc): one argument however many
  Returns how many of them had a place ]]
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
return removed
