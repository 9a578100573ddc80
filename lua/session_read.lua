--[[ session_read.lua -- a session's lease, fields and holdings; with
  ARGV[2] = 1 (a heartbeat) its lease and its holdings' set are renewed
  to the session's ttl_ms first.
  libs: common
  flags: allow-oom
  KEYS[1] session hash dlockd_session:{S}
  KEYS[2] its holdings set dlockd_session:{S}:holdings
  ARGV[1] the caller's token name; "*": any (auth off, or an admin)
  ARGV[2] 1: renew (heartbeat), 0: only read
  Returns {pttl, ttl_ms, value, name, created, creator, holdings, ends}
            holdings {"<kind>\t<name>\t<owner>\t<token>", ...}
            ends: when the session's lease ends, in Redis' clock (ms):
            renewed, its holdings' renewal ends theirs no later; read, an
            acquire for it ends its lease no later
          {0}   no such session (never made, ended, or its lease ran out),
                or it belongs to another token name (not told apart) ]]
if redis.call('exists', KEYS[1]) == 0 then
  return {0}
end
local f = redis.call('hmget', KEYS[1], 'ttl_ms', 'value', 'name', 'created', 'creator')
if ARGV[1] ~= '*' and ARGV[1] ~= (f[5] or '') then
  return {0}
end
local ends
if ARGV[2] == '1' then
  redis.call('pexpire', KEYS[1], f[1])
  if redis.call('exists', KEYS[2]) == 1 then
    redis.call('pexpire', KEYS[2], f[1])
  end
  -- Redis' clock, read for the deadline before the PEXPIRE (a call's
  -- clock is read once): Redis counted the lease from then or later
  ends = now_ms() + tonumber(f[1])
else
  ends = now_ms() + redis.call('pttl', KEYS[1])
end
return {redis.call('pttl', KEYS[1]), tonumber(f[1]), f[2] or '', f[3] or '',
        tonumber(f[4]) or 0, f[5] or '', redis.call('smembers', KEYS[2]), ends}
