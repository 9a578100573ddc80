--[[ rw_write_renew.lua -- heartbeat of the writer.
  KEYS[1] lock hash N                 KEYS[2] timeout key prefix {N}
  ARGV[1] lease ms                    ARGV[2] owner field
  Returns {1, lease}  renewed: N expires in lease ms, or later if the owner's
                      own read holds last longer
          {0}         nobody holds N
          {-2}        the owner does not hold the write lock
          {-1}        N is not a read-write lock ]]
local refused = rw_refuse(KEYS[1])
if refused then
  return refused
end
if redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 0 then
  return {-2}
end
local lease = tonumber(ARGV[1])
local longest = rw_longest(KEYS[1], KEYS[2])
redis.call('pexpire', KEYS[1], longest > lease and longest or lease)
return {1, lease}
