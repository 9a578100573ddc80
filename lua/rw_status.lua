--[[ rw_status.lua -- read the state of a read-write lock.
  KEYS[1] lock hash N                 KEYS[2] timeout key prefix {N}
  KEYS[3] holders dlockd_lock_owners:{N} (its stale entries go with the purge)
  ARGV[1] owner field, or "" for none
  Returns {mode, pttl, readers, read_holds, write_holds}
            mode 0 free, 1 read, 2 write; pttl of N (-2 absent); readers =
            reader fields; the holds of ARGV[1] (0 when not given)
          {-1}  N is a lock or fair lock
          {-3}  N (or its holders' hash) holds something that is not a lock's
  Expired read holds are dropped first, so they are not counted. ]]
local kind = lock_kind(KEYS[1])
if kind == 'lock' then
  return {-1}
elseif kind == 'other' or not type_ok(KEYS[3], 'hash') then
  return {-3}
end
if kind == 'none' or rw_purge(KEYS[1], KEYS[2], KEYS[3]) == 'none' then
  return {0, -2, 0, 0, 0}
end
local mode = redis.call('hget', KEYS[1], 'mode') == 'write' and 2 or 1
local r, w = 0, 0
if ARGV[1] ~= '' then
  r = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
  w = tonumber(redis.call('hget', KEYS[1], ARGV[1] .. ':write') or '0')
end
return {mode, redis.call('pttl', KEYS[1]), rw_readers(KEYS[1]), r, w}
