--[[ sem_undo.lua -- take back one acquire of a semaphore's permit (a grant
  or a repeat) if nothing has changed it since: the undo of a change the
  replicas did not confirm (--redis-sync-replicas), or of a grant nobody
  was told of.
  libs: common sem
  flags: allow-oom
  KEYS[1] count N                     KEYS[2] permits {N}:timeout
  KEYS[3] channel redisson_sc:{N}     KEYS[4] holders dlockd_lock_owners:{N}
  ARGV[1] owner                       ARGV[2] the change, as the acquire gave it
  Returns {1, ended}  taken back (a grant's permit is returned and "1"
                      published; a repeat's lease end put back, the permit
                      returned if that end has passed); ended 1 when the
                      permit is gone. Also when an earlier run took it back
          {0}         the owner holds no permit: nothing of it stands
          {2}         not taken back: a later call changed the permit (a
                      grant under a later repeat is marked withdrawn, and
                      the repeat's undo returns the permit: lock_undo.lua) ]]
local owner, change = ARGV[1], ARGV[2]
if sem_refusal(KEYS[1], KEYS[2], nil, KEYS[4]) then
  return {0}
end
local now = now_ms()
local score = redis.call('zscore', KEYS[2], owner)
if not score or tonumber(score) <= now then
  return {0}
end
local record, undone, prev, withdrawn = owners_record(KEYS[4], owner)
if undone == change then
  return {1, 0}
end
local id, added, before = string.match(record, '^(%d+) ([01]) (%d+) %d+$')
if id ~= change then
  withdraw_under(KEYS[4], owner, change, prev, withdrawn)
  return {2}
end
if added == '1' or tonumber(before) <= now or withdrawn_grant(prev, withdrawn, 1) then
  redis.call(PUBLISH, KEYS[3], '1')
  redis.call('zrem', KEYS[2], owner)
  if redis.call('exists', KEYS[1]) == 1 then
    redis.call('incrby', KEYS[1], 1)
  end
  sem_drop(KEYS[4], owner)
  return {1, 1}
end
redis.call(PUBLISH, KEYS[3], '0')
redis.call('zadd', KEYS[2], before, owner)
owners_undone(KEYS[4], owner, change, prev, withdrawn)
return {1, 0}
