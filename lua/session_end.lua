--[[ session_end.lua -- end a session: delete it, answer what it held (the
  caller releases each holding, whose release scripts publish, so waiters
  are served at once).
  libs: common
  flags: allow-oom
  KEYS[1] session hash dlockd_session:{S}
  KEYS[2] its holdings set dlockd_session:{S}:holdings
  ARGV[1] the caller's token name; "*": any (auth off, or an admin)
  Returns {1, holdings, creator}  ended; holdings {"<kind>\t<name>\t<owner>\t<token>", ...}
          {0}             no such session, or another token name's
  Ending it publishes "ended" on KEYS[1]:ended (dlockd_session:{S}:ended),
  where the session's waiting acquires, on any dlockd instance, listen
  (service/lock/session_watch.c). ]]
if redis.call('exists', KEYS[1]) == 0 then
  return {0}
end
local creator = redis.call('hget', KEYS[1], 'creator') or ''
if ARGV[1] ~= '*' and ARGV[1] ~= creator then
  return {0}
end
local h = redis.call('smembers', KEYS[2])
redis.call(PUBLISH, KEYS[1] .. ':ended', 'ended')
redis.call('del', KEYS[1], KEYS[2])
return {1, h, creator}
