--[[ session_count.lua -- the sessions one token name has open, for the cap
  on them: a sorted set of session ids scored by lease end (Redis' clock),
  whose ended members are trimmed on every call.
  libs: common
  KEYS[1] the token name's set dlockd_sessions:{<token name>}
  ARGV[1] session id                  ARGV[2] its lease ms
  ARGV[3] 'add': count a new one (at most ARGV[4]); 'touch': its lease was
          renewed; 'del': it ended
  ARGV[4] how many sessions a token name may have open, at most
  Returns {1}      done
          {-1, n}  add: n are open already, the cap; not counted ]]
local now = now_ms()
redis.call('zremrangebyscore', KEYS[1], '-inf', now)
if ARGV[3] == 'del' then
  redis.call('zrem', KEYS[1], ARGV[1])
  return {1}
end
if ARGV[3] == 'add' then
  local n = redis.call('zcard', KEYS[1])
  if n >= tonumber(ARGV[4]) then
    return {-1, n}
  end
elseif redis.call('zscore', KEYS[1], ARGV[1]) == false then
  return {1}
end
local ends = now + tonumber(ARGV[2])
redis.call('zadd', KEYS[1], ends, ARGV[1])
if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('pexpire', KEYS[1], ARGV[2])
end
return {1}
