--[[ rw_write_dequeue.lua -- waiting writers give up: stop holding back
  readers, all of one dlockd event loop's leavers of one lock in one call.
  libs: common fair
  flags: allow-oom
  KEYS[1] waiting writers dlockd_rwlock_writers:{N}
  KEYS[2] channel redisson_rwlock:{N}
  ARGV[1] the owners leaving, each as <length>:<owner>, one after the other
          ("3:ci-2:abc" is ci-2 then abc): one argument however many
  Returns how many of them were registered (0 too when the key is not a
  zset: left untouched). When no writer waits any more, "1" wakes the
  readers that queued behind them: published before the places are taken
  out, so a channel the ACL refuses fails the call before it writes
  anything (the places then expire with their lifetime). ]]
local listed = unpack_list(ARGV[1])
if not listed then
  return redis.error_reply('DLOCKD_ARGS malformed owner list')
end
if not type_ok(KEYS[1], 'zset') then
  return 0
end
local CHUNK = 500		-- owners per ZMSCORE / ZREM (Lua's stack is small)
local present = 0
for at = 1, #listed, CHUNK do
  local scores = fair_scores(KEYS[1], {unpack(listed, at, math.min(at + CHUNK - 1, #listed))})
  for i = 1, #scores do
    if scores[i] then
      present = present + 1
    end
  end
end
if present > 0 and redis.call('zcard', KEYS[1]) == present then
  redis.call(PUBLISH, KEYS[2], '1')
end
local removed = 0
for at = 1, #listed, CHUNK do
  removed = removed + redis.call('zrem', KEYS[1], unpack(listed, at, math.min(at + CHUNK - 1, #listed)))
end
return removed
