--[[ rw_force_release.lua -- free a read-write lock held in the given mode.
  libs: common rw
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] channel redisson_rwlock:{N}
  KEYS[3] timeout key prefix {N}      KEYS[4] holders dlockd_lock_owners:{N}
  ARGV[1] "read" or "write": the side being forced
  Returns 1   it was held in that mode and is now free ("0" after readers,
              "1" after a writer, as Redisson does)
          0   not held in that mode (left untouched; expired read holds dropped)
          -1  N is a lock or fair lock (left untouched)
          -3  N (or its holders' hash) holds something that is not a lock's
              (left untouched) ]]
local kind, fields = lock_kind(KEYS[1])
if kind == 'none' then
  return 0
elseif kind == 'lock' then
  return -1
elseif kind == 'other' or not type_ok(KEYS[4], 'hash') then
  return -3
end
local s = rw_scan(KEYS[1], KEYS[3], fields)
local held = s.writers > 0 or rw_scan_left(s, nil) > 0
if held and s.mode == ARGV[1] then
  redis.call(PUBLISH, KEYS[2], ARGV[1] == 'write' and '1' or '0')
end
if rw_purge(KEYS[1], KEYS[3], KEYS[4], s) == 'none' or s.mode ~= ARGV[1] then
  return 0
end
redis.call('del', KEYS[1], KEYS[4])
return 1
