--[[ rw_write_renew.lua -- heartbeat of the writer.
  libs: common rw
  KEYS[1] lock hash N                 KEYS[2] timeout key prefix {N}
  KEYS[3] holders dlockd_lock_owners:{N}
  ARGV[1] lease ms                    ARGV[2] owner field
  ARGV[3] the caller's token name ("": auth off)
  Returns {1, lease}  renewed: N expires in lease ms, or later if the owner's
                      own read holds last longer
          {0}         nobody holds N
          {-2, why, n} the owner does not hold the write lock (why and n as
                      in rw_write_release.lua; why 7: the owner writes N
                      under another token name)
          {-1}        N is a lock or fair lock
          {-3}        N (or its holders' hash) holds something that is not a
                      lock's ]]
local refusal, s = rw_held_refusal(KEYS[1], KEYS[2], ARGV[2], KEYS[3])
if refusal then
  return refusal
end
if redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 0 then
  return rw_not_writer(KEYS[1], ARGV[2])
elseif owners_refused(KEYS[3], ARGV[2] .. ':write', ARGV[3]) then
  return {-2, 7, 0}
end
local lease = tonumber(ARGV[1])
local longest = rw_longest_but(s, nil)
redis.call('pexpire', KEYS[1], longest > lease and longest or lease)
owners_bump(KEYS[3], ARGV[2] .. ':write')
owners_sync(KEYS[3], KEYS[1])
return {1, lease}
