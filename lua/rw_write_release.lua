--[[ rw_write_release.lua -- release one write hold.
  libs: common rw
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] channel redisson_rwlock:{N}
  KEYS[3] timeout key prefix {N}      KEYS[4] holders dlockd_lock_owners:{N}
  ARGV[1] owner field (the writer field is <owner>:write)
  ARGV[2] the caller's token name ("": auth off)
  Returns {1, holds, free}  released; holds = write holds left; free = 1 when
                            nobody holds N any more
          {0}               nobody holds N
          {-2, why, n}      the owner does not hold the write lock: why 5,
                            another writer does; why 3, n readers hold N; why
                            4, the caller reads, and so do n other readers;
                            why 7, the owner writes N under another token
                            name (nothing is written)
          {-1}              N is a lock or fair lock
          {-3}              N (or its holders' hash) holds something that is
                            not a lock's
  Expired read holds are dropped first. The last write hold publishes "1"
  (every waiting reader may enter), before anything is written: when the
  lock is freed, and also on a downgrade to the owner's read holds, where
  Redisson publishes nothing and leaves readers asleep. The lock's watchers
  listen on KEYS[2] too: "1" tells them the holding ended. ]]
local refusal, fields = held_refusal(KEYS[1], 'rw', ARGV[1], KEYS[4])
if refusal then
  return refusal
end
local wf = ARGV[1] .. ':write'
local holds = field_of(fields, wf)
if holds and owners_refused(KEYS[4], wf, ARGV[2]) then
  return {-2, 7, 0}
end
if holds and tonumber(holds) <= 1 then
  redis.call(PUBLISH, KEYS[2], '1')	-- the last write hold goes
end
local s = rw_scan(KEYS[1], KEYS[3], fields)
if rw_purge(KEYS[1], KEYS[3], KEYS[4], s) == 'none' then
  return {0}
elseif not holds then
  return rw_not_writer(KEYS[1], ARGV[1])
end
holds = tonumber(holds) - 1
if holds > 0 then
  redis.call('hincrby', KEYS[1], wf, '-1')
  owners_bump(KEYS[4], wf)
  owners_sync(KEYS[4], KEYS[1])	-- the purge may have cut the lease
  return {1, holds, 0}
end
-- the writer goes: the lock is left to its live read holds (a downgrade,
-- living as long as the longest), or with none that will end, freed
local longest = rw_longest_but(s, nil)
if longest <= 0 then
  redis.call('del', KEYS[1], KEYS[4])
  return {1, 0, 1}
end
redis.call('hdel', KEYS[1], wf)
redis.call('hset', KEYS[1], 'mode', 'read')
redis.call('pexpire', KEYS[1], ms(longest))
owners_sync(KEYS[4], KEYS[1])
return {1, 0, 0}
