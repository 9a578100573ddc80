--[[ rw_status.lua -- what a read-write lock is now: its writer and its
  readers, each with its holding's fencing token, token name and lease.
  libs: common rw
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] timeout key prefix {N}
  KEYS[3] holders dlockd_lock_owners:{N} (its stale entries go with the purge)
  Returns {mode, pttl, holders, {}, 0, values}
            mode 0 free, 1 read, 2 write; pttl of N (-2: absent)
            holders {owner, holds, token, principal, side, pttl, ...}: six
              per holding: side 1, a reader (holds = its live read holds,
              pttl = the longest of their leases); side 2, the writer (the
              owner without ':write', pttl = N's); token 0 and principal ''
              when the holders' hash has no entry (a Redisson holder),
              principal '' when the holding was made with auth off;
            values: each holder's value, in holders' order (false: none)
          {-1}  N is a lock or fair lock
          {-3}  N (or its holders' hash) holds something that is not a lock's
  Expired read holds are dropped first, so they are not shown. ]]
local kind, fields = lock_kind(KEYS[1])
if kind == 'lock' then
  return {-1}
elseif kind == 'other' or not type_ok(KEYS[3], 'hash') then
  return {-3}
end
if kind == 'none' then
  return {0, -2, {}}
end
local s = rw_scan(KEYS[1], KEYS[2], fields)
if rw_purge(KEYS[1], KEYS[2], KEYS[3], s) == 'none' then
  return {0, -2, {}}
end
local pttl = redis.call('pttl', KEYS[1])
local holders, entries, values = {}, {}, {}
local o = redis.call('hgetall', KEYS[3])	-- one call, not one per holder
for i = 1, #o, 2 do
  entries[o[i]] = o[i + 1]
end
local function add(owner, field, holds, side, left)
  local token, principal = owners_parse(entries[field])
  local n = #holders
  holders[n + 1], holders[n + 2], holders[n + 3] = owner, holds, token or 0
  holders[n + 4], holders[n + 5], holders[n + 6] = principal or '', side, left
  values[#values + 1] = entries['=' .. field] or false
end
for _, r in ipairs(s.readers) do
  if #r.live > 0 then
    local longest = -2
    for _, h in ipairs(r.live) do
      if h[2] == -1 or longest == -1 then
        longest = -1
      elseif h[2] > longest then
        longest = h[2]
      end
    end
    add(r.field, r.field, #r.live, 1, longest)
  end
end
for _, w in ipairs(s.written) do
  add(string.sub(w[1], 1, -7), w[1], w[2], 2, pttl)
end
return {redis.call('hget', KEYS[1], 'mode') == 'write' and 2 or 1, pttl, holders, {}, 0, values}
