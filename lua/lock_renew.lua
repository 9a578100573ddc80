--[[ lock_renew.lua -- heartbeat: set the lease of a lock the owner holds.
  libs: common
  KEYS[1] lock hash N                 KEYS[2] holders dlockd_lock_owners:{N}
  KEYS[3] (plain locks only) channel redisson_lock__channel:{N}
  ARGV[1] lease ms                    ARGV[2] owner field
  ARGV[3] the caller's token name ("": auth off)
  Returns {1, lease}  renewed: N now expires in lease ms
          {0}         nobody holds N (the lease already ran out)
          {-2}        another owner holds N
          {-2, 7, 0}  the owner holds N under another token name
          {-1}        N is a read-write lock
          {-3}        N (or its holders' hash) holds something that is not a
                      lock's
  Never re-creates a lock: only an existing owner field is renewed.
  A lease made shorter publishes "0" on KEYS[3]: waiters (of every dlockd
  instance) time their retry from the lease they saw, and expiry publishes
  nothing, so without it they would sleep past the new, earlier end. A
  Redisson waiter takes the message as "try now", finds the lock held and
  waits again with the new lease: harmless. ]]
local refusal = held_refusal(KEYS[1], 'lock', ARGV[2], KEYS[2])
if refusal then
  return refusal
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return {-2}
elseif owners_refused(KEYS[2], ARGV[2], ARGV[3]) then
  return {-2, 7, 0}
end
if KEYS[3] and redis.call('pttl', KEYS[1]) > tonumber(ARGV[1]) then
  redis.call(PUBLISH, KEYS[3], 0)
end
redis.call('pexpire', KEYS[1], ARGV[1])
owners_bump(KEYS[2], ARGV[2])
owners_sync(KEYS[2], KEYS[1])
return {1, tonumber(ARGV[1])}
