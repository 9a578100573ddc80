--[[ rw_undo.lua -- take back one acquire (a grant, repeat or re-entry) of
  either side of a read-write lock, if nothing has changed the holding
  since: the undo of a change the replicas did not confirm
  (--redis-sync-replicas), or of a grant nobody was told of.
  libs: common rw
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] channel redisson_rwlock:{N}
  KEYS[3] timeout key prefix {N}      KEYS[4] holders dlockd_lock_owners:{N}
  ARGV[1] owner field                 ARGV[2] 'read' or 'write': the side
  ARGV[3] the change: its number, as the acquire returned it
  Returns {1, ended}  taken back: the holding is as it was before the change
                      (see below); ended 1 when the owner's holding on that
                      side is gone. Also when an earlier run took it back
          {0}         the owner holds that side no more (released, expired,
                      forced): nothing of the change stands
          {2}         not taken back (a grant under a later repeat is
                      marked withdrawn, as lock_undo.lua says): a later
                      call changed the holding (a
                      repeat, re-entry, renewal, release, or the purge of
                      one of its expired read holds), or the change left no
                      record of itself
  What is taken back: a new holding goes (an upgrade's write holding too:
  the lock is read-locked again); a re-entry's hold goes; a write repeat's
  or re-entry's lease end, and a read repeat's end of each read hold, are
  put back (a hold, or the write holding, whose end has passed since goes).
  The lock then lives as a release leaves it: a read-locked N as long as
  its longest read hold, a write-locked N the writer's lease, or longer for
  its owner's read holds. A read holding's change may also have lengthened
  the lease of its owner's write holding; that is put back only if the
  write holding has not changed since (its number, recorded with the
  change). Like a write release it publishes "1" before its first write:
  every waiter looks again. The fencing counter is not turned back. ]]
local owner, side, change = ARGV[1], ARGV[2], ARGV[3]
if not owner_ok(owner) then
  return redis.error_reply('DLOCKD_OWNER owner is a field of the layout')
end
if lock_kind(KEYS[1]) ~= 'rw' then
  return {0}
end
local wf = owner .. ':write'
local field = side == 'write' and wf or owner
local holds = tonumber(redis.call('hget', KEYS[1], field))
if not holds then
  return {0}
elseif not type_ok(KEYS[4], 'hash') then
  return {2}
end
local record, undone, prev, withdrawn = owners_record(KEYS[4], field)
if undone == change then
  return {1, 0}
end
-- a record's numbers: change, added, N's lease end, the write holding's
-- change, read ends
local function numbers(r)
  local v = {}
  for x in string.gmatch(r, '%d+') do
    v[#v + 1] = x
  end
  return v
end
local v = numbers(record)
if v[1] ~= change or not v[4] or (side == 'read' and v[2] == '0' and #v ~= 4 + holds) then
  withdraw_under(KEYS[4], field, change, prev, withdrawn)
  return {2}
end
if withdrawn_grant(prev, withdrawn, holds) then
  v = numbers(prev)	-- the grant under this repeat goes too: as it found N
end
local added, before, writer = tonumber(v[2]), tonumber(v[3]), tonumber(v[4])
local now = now_ms()
local base = KEYS[3] .. ':' .. owner .. ':rwlock_timeout:'

redis.call(PUBLISH, KEYS[2], '1')
if side == 'write' then
  if (added == 1 and holds == 1) or before <= now then
    redis.call('hdel', KEYS[1], wf)
  elseif added == 1 then
    redis.call('hincrby', KEYS[1], wf, -1)
  end
elseif added == 1 then
  redis.call('del', base .. holds)
  if holds == 1 then
    redis.call('hdel', KEYS[1], owner)
  else
    redis.call('hincrby', KEYS[1], owner, -1)
  end
else
  for k = 1, holds do
    local e = tonumber(v[4 + k])
    if e > now then
      redis.call('pexpire', base .. k, e - now)
    else
      redis.call('del', base .. k)
    end
  end
end

-- the lease the owner's write holding is to have now: its end before a
-- change of its own, or before a change of its owner's read holding if
-- it has not changed since (nil: leave it)
local writing = redis.call('hexists', KEYS[1], wf) == 1
local write_end
if writing and side == 'write' then
  write_end = before
elseif writing and writer > 0 and owners_change(KEYS[4], wf) == writer then
  write_end = before
  if before <= now then
    redis.call('hdel', KEYS[1], wf)	-- its lease had ended
    writing = false
  end
end
-- drop read holds that are over (renumbering the rest), or N when nothing
-- is left
local s = rw_scan(KEYS[1], KEYS[3])
if rw_purge(KEYS[1], KEYS[3], KEYS[4], s) == 'none' then
  return {1, 1}
end
local longest = rw_longest_but(s, nil)
if not writing then
  if redis.call('hlen', KEYS[1]) <= 1 or longest <= 0 then
    redis.call('del', KEYS[1], KEYS[4])
    return {1, 1}
  end
  redis.call('hset', KEYS[1], 'mode', 'read')
  redis.call('pexpire', KEYS[1], longest)
elseif write_end then
  redis.call('pexpire', KEYS[1], math.max(write_end - now, longest))
end
local ended = 1
if redis.call('hexists', KEYS[1], field) == 1 then
  ended = 0
  owners_undone(KEYS[4], field, change, prev, withdrawn)
end
owners_sync(KEYS[4], KEYS[1])
return {1, ended}
