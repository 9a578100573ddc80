--[[ fair_dequeue.lua -- waiters give up (deadline, hang-up): leave the queue,
  all of one dlockd event loop's leavers of one lock in one call.
  libs: common fair
  flags: allow-oom
  KEYS[1] queue redisson_lock_queue:{N}
  KEYS[2] deadlines redisson_lock_timeout:{N}
  KEYS[3] channel prefix redisson_lock__channel:{N}
  ARGV[1] the owners leaving, each as <length>:<owner>, one after the other
          ("3:ci-2:abc" is ci-2 then abc): one argument however many
  Returns how many of them were queued (0 too when the queue is not a
  queue: left untouched). When the head leaves, the next waiter that is
  not leaving is told (before anything is written), so nobody waits
  behind an empty place. Each leaver taken out of the queue is told "0"
  on its own channel too: a place is an owner's, and another wait of the
  same owner (a second request, on any dlockd) that still runs must queue
  again now, not at its next refresh while the lock may come free (found
  by a probe: the lock left free up to 2 s). A refusal of that channel
  is let be (the refresh still queues it again). Each leaver costs one
  LREM that stops at its entry (one walk in Redis' C, ~30 ns an entry,
  never a copy of the queue into Lua: that cost ~8 ms with 10,000
  queued, blocking Redis), and dlockd sends a few leavers a script
  (leavers.c), so a script's cost is bounded by a few walks of a queue
  capped by --max-fair-queue. ]]
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
local CHUNK = 500		-- owners per ZREM (Lua's stack is small)
for at = 1, #listed, CHUNK do
  removed = removed + redis.call('zrem', KEYS[2], unpack(listed, at, math.min(at + CHUNK - 1, #listed)))
end
for i = 1, #listed do
  -- an owner is queued once: the walk ends at its entry (waiters that
  -- time out joined early, so theirs is near the head)
  if redis.call('lrem', KEYS[1], 1, listed[i]) == 1 then
    redis.pcall(PUBLISH, KEYS[3] .. ':' .. listed[i], '0')
  end
end
if was_head then
  fair_purge(KEYS[1], KEYS[2], now)
end
return removed
