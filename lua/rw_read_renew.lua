--[[ rw_read_renew.lua -- heartbeat of a reader: renew every read hold it has.
  KEYS[1] lock hash N                 KEYS[2] timeout key prefix {N}
  ARGV[1] lease ms                    ARGV[2] owner field
  Returns {1, lease}  renewed: each hold and N now last at least lease ms
          {0}         nobody holds N
          {-2}        the owner holds no read lock on N
          {-1}        N is not a read-write lock ]]
local refused = rw_refuse(KEYS[1])
if refused then
  return refused
end
local holds = tonumber(redis.call('hget', KEYS[1], ARGV[2]))
if not holds then
  return {-2}
end
local lease = tonumber(ARGV[1])
for k = 1, holds do
  redis.call('set', KEYS[2] .. ':' .. ARGV[2] .. ':rwlock_timeout:' .. k, 1, 'px', lease)
end
lease_at_least(KEYS[1], lease)
return {1, lease}
