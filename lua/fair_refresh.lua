--[[ fair_refresh.lua -- keep the queue places of many sleeping fair-lock
  waiters alive in one call: what each one's periodic fair_acquire did for
  the queue, for all of one dlockd event loop's waiters on one lock.
  libs: common fair
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] queue redisson_lock_queue:{N}
  KEYS[3] deadlines redisson_lock_timeout:{N}
  KEYS[4] channel prefix redisson_lock__channel:{N}; waiter w listens on <prefix>:<w>
  ARGV[1] queue entry lifetime ms
  ARGV[2] the owners to refresh, each as <length>:<owner>, one after the
          other ("3:ci-2:abc" is ci-2 then abc): one argument however many
  Returns {1, w...}  done; the w are the listed owners that must try again
                     now (with fair_acquire): those no longer queued (their
                     place went stale and was dropped: queueing again puts
                     them at the tail), and the live head when it is one of
                     them and was not told on its channel here (it became
                     head without a word, e.g. behind a Redisson waiter that
                     took the lock or gave up, which publish nothing): the
                     head must watch the holder's lease. In ARGV[2]'s order.
          {-1}       N is a read-write lock
          {-3}       N or its queue holds something that is not a lock;
                     nothing is written
  Dead heads (deadline past) are dropped first and, if the head changed,
  the new one is told on its channel, before anything is written. Each
  listed owner still queued gets the deadline Redis' now + ARGV[1] (an
  owner never queued is not added: ZADD XX). ]]
local kind = lock_kind(KEYS[1])
if kind == 'rw' then
  return {-1}
elseif kind == 'other' or not type_ok(KEYS[2], 'list') or not type_ok(KEYS[3], 'zset') then
  return {-3}
end
local listed = unpack_list(ARGV[2])
if not listed then
  return redis.error_reply('DLOCKD_ARGS malformed owner list')
end

local now = now_ms()
local head, at, old_head = fair_head(KEYS[2], KEYS[3], now)
local told = head ~= old_head
if told then
  fair_notify(KEYS[4], head)	-- dead heads are dropped: the new one may go
end
fair_purge(KEYS[2], KEYS[3], now, at)

local deadline = now + tonumber(ARGV[1])
local out = {1}
local CHUNK = 500		-- owners per ZMSCORE / ZADD (Lua's stack is small)
for first = 1, #listed, CHUNK do
  local owners = {}
  for i = first, math.min(first + CHUNK - 1, #listed) do
    owners[#owners + 1] = listed[i]
  end
  local scores = fair_scores(KEYS[3], owners)
  local keep = {}
  for i = 1, #owners do
    if not scores[i] then
      out[#out + 1] = owners[i]		-- no longer queued
    else
      keep[#keep + 1] = deadline
      keep[#keep + 1] = owners[i]
      if owners[i] == head and not told then
        out[#out + 1] = owners[i]	-- head, and nobody told it
      end
    end
  end
  if #keep > 0 then
    redis.call('zadd', KEYS[3], 'XX', unpack(keep))
  end
end
return out
