--[[ lock_undo.lua -- take back one acquire (a grant, repeat or re-entry)
  of an exclusive or fair lock, if nothing has changed the holding since:
  the undo of a change the replicas did not confirm (--redis-sync-replicas),
  or of a grant nobody was told of.
  libs: common fair
  flags: allow-oom
  KEYS[1] lock hash N
  KEYS[2] channel redisson_lock__channel:{N}; for a fair lock the prefix of
          its waiters' channels <prefix>:<w>
  KEYS[3] holders dlockd_lock_owners:{N}
  KEYS[4] (fair locks only) queue redisson_lock_queue:{N}
  KEYS[5] (fair locks only) deadlines redisson_lock_timeout:{N}
  ARGV[1] owner field                 ARGV[2] the change: its number, as the
                                      acquire returned it
  Returns {1, ended}  taken back: the holding is as it was before the change
                      (none after a grant; after a repeat or re-entry the
                      holds and the lease end it had, and none if that end
                      has passed since); ended 1 when the owner's holding
                      is gone. Also when an earlier run took it back already
          {0}         the owner holds N no more (released, expired, forced):
                      nothing of the change stands
          {2}         not taken back: a later call changed the holding (a
                      repeat, re-entry, renewal or release, whose answer
                      stands), or the change left no record of itself. A
                      grant under a later repeat is marked withdrawn: if
                      the repeat is undone too, its undo takes the holding
                      back whole
  Every change of a holding numbers itself in the holders' hash, with what
  its undo needs (lib/common.lua, owners_bump); the undo runs only while the
  holding's number is still the change's (or a session heartbeat's renewal
  of it). The undo of a repeat over a grant puts that grant's record back
  as the last change, or, the grant withdrawn, takes the holding back.
  Like a release it tells the waiters ("0" on KEYS[2], a fair lock's queue
  head), before its first write, and drops dead queue heads. The fencing
  counter is not turned back: tokens never go back. ]]
local owner, change = ARGV[1], ARGV[2]
if not owner_ok(owner) then
  return redis.error_reply('DLOCKD_OWNER owner is a field of the layout')
end
if lock_kind(KEYS[1]) ~= 'lock' then
  return {0}
end
local holds = tonumber(redis.call('hget', KEYS[1], owner))
if not holds then
  return {0}
elseif not type_ok(KEYS[3], 'hash') or
       (KEYS[4] and (not type_ok(KEYS[4], 'list') or not type_ok(KEYS[5], 'zset'))) then
  return {2}
end
local record, undone, prev, withdrawn = owners_record(KEYS[3], owner)
if undone == change then
  return {1, 0}
end
local id, added, before = string.match(record, '^(%d+) ([01]) (%d+) %d+$')
if id ~= change then
  withdraw_under(KEYS[3], owner, change, prev, withdrawn)
  return {2}
end
added, before = tonumber(added), tonumber(before)
local now = now_ms()
local over = holds - added <= 0 or before <= now or withdrawn_grant(prev, withdrawn, holds)
if KEYS[4] then
  local head, at = fair_head(KEYS[4], KEYS[5], now)
  if over then
    fair_freed(KEYS[2], head)
  else
    fair_notify(KEYS[2], head)	-- a shorter lease: the head watches it
  end
  fair_purge(KEYS[4], KEYS[5], nil, at)
else
  -- freed, or a shorter lease that waiters timed their retry by
  redis.call(PUBLISH, KEYS[2], '0')
end
if over then
  redis.call('del', KEYS[1], KEYS[3])
  return {1, 1}
end
if added == 1 then
  redis.call('hincrby', KEYS[1], owner, -1)
end
redis.call('pexpire', KEYS[1], before - now)
owners_undone(KEYS[3], owner, change, prev, withdrawn)
owners_sync(KEYS[3], KEYS[1])
return {1, 0}
