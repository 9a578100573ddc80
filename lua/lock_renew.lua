--[[ lock_renew.lua -- heartbeat: set the lease of a lock the owner holds.
  KEYS[1] lock hash N
  ARGV[1] lease ms                    ARGV[2] owner field
  Returns {1, lease}  renewed: N now expires in lease ms
          {0}         nobody holds N (the lease already ran out)
          {-2}        another owner holds N
          {-1}        N is not an exclusive lock
  Never re-creates a lock: only an existing owner field is renewed. ]]
local kind = redis.call('type', KEYS[1]).ok
if kind == 'none' then
  return {0}
end
if kind ~= 'hash' or redis.call('hexists', KEYS[1], 'mode') == 1 then
  return {-1}
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return {-2}
end
redis.call('pexpire', KEYS[1], ARGV[1])
return {1, tonumber(ARGV[1])}
