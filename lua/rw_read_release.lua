--[[ rw_read_release.lua -- release one read hold.
  libs: common rw
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] channel redisson_rwlock:{N}
  KEYS[3] timeout key prefix {N}      KEYS[4] holders dlockd_lock_owners:{N}
  KEYS[5] watchers' channel dlockd_lock_state:{N}: the end of the owner's
          holding publishes 'released' there, unless "0" went to KEYS[2],
          where the watchers listen too (a refusal of the channel is let be)
  ARGV[1] owner field                 ARGV[2] the caller's token name ("": auth off)
  Returns {1, holds, free}  released; holds = the owner's read holds left;
                            free = 1 when nobody holds N any more ("0" published)
          {0}               the owner holds no read lock on N (never took it,
                            released it, or its lease ran out)
          {-2}              another owner holds the write lock
          {-2, 7, 0}        the owner reads N under another token name:
                            nothing is written
          {-1}              N is a lock or fair lock
          {-3}              N (or its holders' hash) holds something that is
                            not a lock's
  Expired read holds are dropped first. The lock then lives exactly as long
  as its longest remaining read hold (a write holder's lease is never cut).
  When one reader is left, "0" is published too: a writer waiting to upgrade
  from that read may go now. Either "0" goes out before anything is written. ]]
local owner = ARGV[1]
local refusal, fields = held_refusal(KEYS[1], 'rw', owner, KEYS[4])
if refusal then
  return refusal
end
-- "0" goes out before the first write, decided from what the release will
-- leave: nobody (or no live read hold), or one reader of a read lock
local s, told, mine = rw_scan(KEYS[1], KEYS[3], fields), false, 0
for _, r in ipairs(s.readers) do
  if r.field == owner and #r.live > 0 then
    mine = #r.live
    if owners_refused(KEYS[4], owner, ARGV[2]) then
      return {-2, 7, 0}
    end
    local readers, longest = rw_scan_left(s, owner)
    if readers + s.writers == 0 or
       (s.mode ~= 'write' and (longest <= 0 or readers == 1)) then
      redis.call(PUBLISH, KEYS[2], '0')
      told = true
    end
  end
end
if rw_purge(KEYS[1], KEYS[3], KEYS[4], s) == 'none' then
  return {0}
end
-- what the scan read is what the purge left: the mode, the writer, and
-- the owner's live holds, numbered 1..mine
local mode = s.mode
if mine == 0 then
  if mode == 'write' and not field_of(fields, owner .. ':write') then
    return {-2}
  end
  return {0}
end
local holds, timeout = mine - 1, string.format('%s:%s:rwlock_timeout:%d', KEYS[3], owner, mine)
if holds == 0 and not told then
  redis.pcall(PUBLISH, KEYS[5], 'released')
end
-- the hold just dropped was the owner's last live one
local readers, longest = rw_scan_left(s, owner)
if readers + s.writers == 0 then
  redis.call('del', KEYS[1], KEYS[4], timeout)	-- nobody else holds it: free
  return {1, 0, 1}
end
if holds == 0 then
  redis.call('hdel', KEYS[1], owner)
else
  redis.call('hincrby', KEYS[1], owner, '-1')
  owners_bump(KEYS[4], owner)
end
redis.call('del', timeout)
if mode == 'write' then
  if longest > redis.call('pttl', KEYS[1]) then
    redis.call('pexpire', KEYS[1], ms(longest))
  end
  owners_sync(KEYS[4], KEYS[1])
  return {1, holds, 0}
elseif longest > 0 then
  redis.call('pexpire', KEYS[1], ms(longest))
  owners_sync(KEYS[4], KEYS[1])
  return {1, holds, 0}
end
redis.call('del', KEYS[1], KEYS[4])
return {1, holds, 1}
