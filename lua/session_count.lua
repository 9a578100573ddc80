--[[ session_count.lua -- the open sessions of each token name, for the cap
  on them and the count of all: a sorted set per token name of session ids
  scored by lease end (Redis' clock), and a set of the token names that
  have one. Every key is in one slot ({dlockd_sessions}); each call first
  trims every token name's ended sessions, so the count of all is exact as
  of the call.
  libs: common sessions
  flags: allow-oom
  KEYS[1] the token name's set dlockd_sessions:{dlockd_sessions}:<token name>
  KEYS[2] the token names dlockd_sessions:{dlockd_sessions}
  ARGV[1] session id                  ARGV[2] its lease ms
  ARGV[3] 'add': count a new one (at most ARGV[4]); 'touch': its lease was
          renewed; 'del': it ended
  ARGV[4] how many sessions a token name may have open, at most
  ARGV[5] the prefix of the token names' sets (KEYS[1] without the name)
  Returns {1, n, all}   done; n the token name's open sessions after it,
                        all every token name's
          {-1, n, all}  add: n are open already, the cap; not counted
  Cost: one trim per token name with open sessions. ]]
local now = now_ms()
local all = sessions_trim(KEYS[2], ARGV[5], now)
local n = redis.call('zcard', KEYS[1])
if ARGV[3] == 'del' then
  local gone = redis.call('zrem', KEYS[1], ARGV[1])
  return {1, n - gone, all - gone}
end
local new = redis.call('zscore', KEYS[1], ARGV[1]) == false
if ARGV[3] == 'add' then
  if n >= tonumber(ARGV[4]) then
    return {-1, n, all}
  end
elseif new then
  return {1, n, all}
end
redis.call('zadd', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('sadd', KEYS[2], string.sub(KEYS[1], #ARGV[5] + 1))
local last = redis.call('zrange', KEYS[1], -1, -1, 'withscores')
redis.call('pexpire', KEYS[1], math.max(1, tonumber(last[2]) - now))
if new then
  n, all = n + 1, all + 1
end
return {1, n, all}
