--[[ fair_release.lua -- release one hold of a fair lock.
  libs: common fair
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] queue redisson_lock_queue:{N}
  KEYS[3] deadlines redisson_lock_timeout:{N}
  KEYS[4] channel prefix redisson_lock__channel:{N}
  KEYS[5] holders dlockd_lock_owners:{N}
  KEYS[6] watchers' channel dlockd_lock_state:{N}: the end of the holding
          publishes 'released' there when "0" went to the queue head (a
          refusal of the channel is let be); with nobody queued, the
          watchers hear the "0" on KEYS[4], where they listen too
  ARGV[1] owner field                 ARGV[2] the caller's token name ("": auth off)
  Returns {1, holds}  one hold released; holds = 0: free, and "0" went to the
                      queue head's channel, or with nobody queued to the
                      plain lock's channel KEYS[4] (waiters on /locks/N)
          {0}         nobody holds N (the head is told anyway, as Redisson does)
          {-2}        another owner holds N
          {-2, 7, 0}  the owner holds N under another token name
          {-1}        N is a read-write lock
          {-3}        N, its queue or its holders' hash holds something that is
                      not a lock's, or its deadlines do while the queue has
                      entries (an empty queue's are not read)
  Past the kind checks, dead queue heads (deadline past) are dropped
  whatever the answer; no hold changes unless one is released. ]]
if not owner_ok(ARGV[1]) then
  return redis.error_reply('DLOCKD_OWNER owner is a field of the layout')
end
local kind, fields = lock_kind(KEYS[1])
if kind == 'rw' then
  return {-1}
elseif kind == 'other' or not type_ok(KEYS[5], 'hash') then
  return {-3}
end
local head, at = fair_head(KEYS[2], KEYS[3], now_ms())
if head == nil then
  return {-3}	-- the queue is not a list, or its deadlines no zset (reads)
end
local holds = 0
if kind ~= 'none' then
  holds = field_of(fields, ARGV[1])
  if not holds then
    fair_purge(KEYS[2], KEYS[3], nil, at)
    return {-2}
  elseif owners_refused(KEYS[5], ARGV[1], ARGV[2]) then
    fair_purge(KEYS[2], KEYS[3], nil, at)
    return {-2, 7, 0}
  end
  holds = tonumber(holds) - 1
end
if holds <= 0 and kind ~= 'none' then
  fair_freed(KEYS[4], head)
elseif kind == 'none' then
  fair_notify(KEYS[4], head)
end
fair_purge(KEYS[2], KEYS[3], nil, at)
if kind == 'none' then
  return {0}
elseif holds > 0 then
  redis.call('hincrby', KEYS[1], ARGV[1], '-1')
  owners_bump(KEYS[5], ARGV[1])
  owners_sync(KEYS[5], KEYS[1])
  return {1, holds}
end
if head then
  redis.pcall(PUBLISH, KEYS[6], 'released')
end
redis.call('del', KEYS[1], KEYS[5])
return {1, 0}
