--[[ rw_read_renew.lua -- heartbeat of a reader: renew every read hold it has.
  libs: common rw
  KEYS[1] lock hash N                 KEYS[2] timeout key prefix {N}
  KEYS[3] holders dlockd_lock_owners:{N}
  ARGV[1] lease ms                    ARGV[2] owner field
  ARGV[3] the caller's token name ("": auth off)
  Returns {1, lease}  renewed: each of the owner's holds lasts lease ms; a
                      read-mode N as long as its longest hold, a
                      write-mode N at least lease ms
          {0}         the owner holds no read lock on N (never took it,
                      released it, or its lease ran out)
          {-2}        another owner holds the write lock
          {-2, 7, 0}  the owner reads N under another token name
          {-1}        N is a lock or fair lock
          {-3}        N (or its holders' hash) holds something that is not a
                      lock's
  Expired read holds are dropped first: a lease that ran out is not renewed. ]]
local owner = ARGV[2]
local refusal, s = rw_held_refusal(KEYS[1], KEYS[2], owner, KEYS[3])
if refusal then
  return refusal
end
local holds = tonumber(redis.call('hget', KEYS[1], owner))
if not holds then
  if redis.call('hget', KEYS[1], 'mode') == 'write' and
     redis.call('hexists', KEYS[1], owner .. ':write') == 0 then
    return {-2}
  end
  return {0}
elseif owners_refused(KEYS[3], owner, ARGV[3]) then
  return {-2, 7, 0}
end
local lease = tonumber(ARGV[1])
for k = 1, holds do
  redis.call('set', KEYS[2] .. ':' .. owner .. ':rwlock_timeout:' .. k, 1, 'px', lease)
end
if redis.call('hget', KEYS[1], 'mode') == 'read' then
  -- N lives exactly as long as its longest hold, so a shorter heartbeat
  -- may end it sooner (as Redisson's unlock recomputes it)
  local others = rw_longest_but(s, owner)
  redis.call('pexpire', KEYS[1], others > lease and others or lease)
else
  lease_at_least(KEYS[1], lease)	-- the writer's own lease is never cut
end
owners_bump(KEYS[3], owner)
owners_sync(KEYS[3], KEYS[1])
return {1, lease}
