--[[ session_add.lua -- record a holding a session took (or drop one).
  libs: common
  KEYS[1] session hash dlockd_session:{S}
  KEYS[2] its holdings set dlockd_session:{S}:holdings
  ARGV[1] the holding "<kind>\t<name>\t<owner>\t<token>"
  ARGV[2] how many holdings a session may have, at most
  ARGV[3] 1: add it, 0: drop it
  ARGV[4] add: 1 the grant added a hold; 0 it added none (the owner's
          repeat of a holding it had), so it must be S's already
  Returns {1, pttl, ends}
                      added (or already there): S has pttl ms left, and
                      ends then, in Redis' clock (ms; 0 when S has no
                      TTL, which dlockd never leaves); dropped: {1, pttl}
          {0}         S has ended: the caller releases the holding again
          {-1, n}     S has n holdings already, the cap: not added
          {-2}        a repeat of a holding S does not have: its owner
                      holds it outside S (another session, or none) ]]
if redis.call('exists', KEYS[1]) == 0 then
  if ARGV[3] == '0' then
    redis.call('srem', KEYS[2], ARGV[1])
  end
  return {0}
end
if ARGV[3] == '0' then
  redis.call('srem', KEYS[2], ARGV[1])
  return {1, redis.call('pttl', KEYS[1])}
end
if redis.call('sismember', KEYS[2], ARGV[1]) == 0 then
  if ARGV[4] == '0' then
    return {-2}
  end
  local n = redis.call('scard', KEYS[2])
  if n >= tonumber(ARGV[2]) then
    return {-1, n}
  end
  redis.call('sadd', KEYS[2], ARGV[1])
end
local pttl = redis.call('pttl', KEYS[1])
redis.call('pexpire', KEYS[2], pttl)	-- a write: the clock is read before it
return {1, pttl, pttl > 0 and now_ms() + pttl or 0}
