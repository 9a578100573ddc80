--[[ session_create.lua -- make a session: one lease for many holdings.
  libs: common
  KEYS[1] session hash dlockd_session:{S}
  KEYS[2] its holdings set dlockd_session:{S}:holdings
  ARGV[1] lease ms                    ARGV[2] creator's token name ("": auth off)
  ARGV[3] value ("": none)            ARGV[4] name for humans ("": none)
  Returns 1   made; S lives ARGV[1] ms unless a heartbeat renews it
          0   S exists already (ids are 128 random bits: never in practice)
  The hash holds ttl_ms (the lease every heartbeat renews to), creator,
  value, name and created (Redis' clock, ms); its PEXPIRE is the lease. ]]
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
redis.call('hset', KEYS[1], 'ttl_ms', ARGV[1], 'creator', ARGV[2], 'value', ARGV[3],
           'name', ARGV[4], 'created', now_ms())
redis.call('pexpire', KEYS[1], ARGV[1])
redis.call('del', KEYS[2])
return 1
