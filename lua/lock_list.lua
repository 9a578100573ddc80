--[[ lock_list.lua -- what the listing (GET /locks) shows of the hashes one
  SCAN found: for each, whether it is a lock now and who holds it. It only
  reads, and never scans: dlockd's own SCAN found the hashes.
  libs: common rw
  flags: no-writes
  KEYS    none; on a Redis Cluster the one hash asked about (a script
          declares the slot it runs on; its other keys share it)
  ARGV[1] the hashes N, each as <length>:<name>, one after the other
  ARGV[2] their timeout key prefixes {N}, the same way and in the same order
  ARGV[3] the read holds to look at in one call: once the hashes done so
          far count that many (each hold costs a PTTL, live or not; each
          reader counts as one more; each permit a semaphore lists one),
          the call stops there, after one hash at least; a semaphore that
          would pass the count is left for the next call unless it is the
          call's first
  Returns one element per hash done, in ARGV[1]'s order (all of them, or
  the first ones when ARGV[3] stopped it: the caller asks again for the
  rest):
    0                        not a lock now: gone, something that is not a
                             lock (lock_kind 'other'), or a read-write lock
                             whose holds all ran out
    {1, pttl, o1, n1, ..., values}
                             a lock or fair lock (one layout): its lease,
                             then each owner and its holds
    {3, pttl, limit, o1, 1, ..., values}
                             a semaphore with permits out (N a string, its
                             permits in ARGV[2]'s {N} .. ':timeout'): the
                             longest lease left, its limit, the owners of
                             the 100 permits ending first (a Redisson
                             permit's id in hex)
    {2, pttl, mode, o1, n1, s1, ..., values}
                             a read-write lock: its lease (in read mode the
                             longest live read hold's), mode 1 read or
                             2 write, then each holder, its live holds and
                             its side (1 read, 2 write); expired read holds
                             are not counted (and not dropped: this only
                             reads)
  Each ends with values: the holders' values, in their order (false for
  none; {} when the holders' hash is not one). ]]
local keys, tags = unpack_list(ARGV[1]), unpack_list(ARGV[2])
local budget = tonumber(ARGV[3])
if not keys or not tags or #keys ~= #tags or not budget then
  return redis.error_reply('DLOCKD_ARGS malformed key list')
end

-- The holder values of a name's holdings (fields), from its holders'
-- hash dlockd_lock_owners:<tag>, in order (false: none); none at all when
-- that key is not a hash.
local function values_of(tag, fields)
  local owners = 'dlockd_lock_owners:' .. tag
  if not type_ok(owners, 'hash') then
    return {}
  end
  return owners_values(owners, fields)
end

local function plain(key, tag)
  local entry, fields = {1, redis.call('pttl', key)}, {}
  local f = redis.call('hgetall', key)
  for i = 1, #f, 2 do
    entry[#entry + 1] = f[i]
    entry[#entry + 1] = tonumber(f[i + 1])
    fields[#fields + 1] = f[i]
  end
  entry[#entry + 1] = values_of(tag, fields)
  return entry
end

local function longer(a, b)
  if a == -1 or b == -1 then
    return -1
  end
  return math.max(a, b)
end

local looked = 0		-- read holds looked at so far

local function rw(key, tag, fields)
  local s = rw_scan(key, tag, fields)
  for _, r in ipairs(s.readers) do
    looked = looked + r.n + 1
  end
  local write = s.mode == 'write'
  local entry = {2, write and redis.call('pttl', key) or -2, write and 2 or 1}
  local held = {}
  for _, r in ipairs(s.readers) do
    if #r.live > 0 then
      held[#held + 1] = r.field
      entry[#entry + 1] = r.field
      entry[#entry + 1] = #r.live
      entry[#entry + 1] = 1
      for _, h in ipairs(r.live) do
        if not write then
          entry[2] = entry[2] == -2 and h[2] or longer(entry[2], h[2])
        end
      end
    end
  end
  if write then
    local f = redis.call('hgetall', key)
    for i = 1, #f, 2 do
      if string.sub(f[i], -6) == ':write' then
        held[#held + 1] = f[i]
        entry[#entry + 1] = string.sub(f[i], 1, -7)
        entry[#entry + 1] = tonumber(f[i + 1])
        entry[#entry + 1] = 2
      end
    end
  end
  if #entry == 3 then
    return 0
  end
  entry[#entry + 1] = values_of(tag, held)
  return entry
end

local SEM_LISTED = 100	-- a semaphore's permits listed, at most (as GET does)

-- A semaphore's entry: its limit, the longest lease left and the
-- SEM_LISTED permits ending first; nil (nothing done) when they would take
-- more than the budget left and it is not the call's first hash: the
-- caller asks again from it.
local function semaphore(key, tag, first)
  local permits = tag .. ':timeout'
  if not counter_ok(key) or redis.call('type', permits).ok ~= 'zset' then
    return 0
  end
  local now = now_ms()
  local all = redis.call('zcard', permits)
  local out = all - redis.call('zcount', permits, '-inf', now)
  if out <= 0 then
    return 0
  end
  local listed = math.min(out, SEM_LISTED)
  if not first and listed > budget - looked then
    return nil
  end
  looked = looked + listed
  local v = redis.call('zrangebyscore', permits, '(' .. now, '+inf', 'withscores', 'limit', 0, listed)
  local last = tonumber(redis.call('zrange', permits, -1, -1, 'withscores')[2])
  -- permits past their lease end are out of N until a call takes them
  -- back: the limit counts them
  local entry = {3, last >= 922337203685477 and -1 or last - now,
                 tonumber(redis.call('get', key)) + all}
  local held = {}
  for i = 1, #v, 2 do
    local m = v[i]
    held[#held + 1] = m
    if not string.match(m, '^[%w%._:%-]+$') then
      m = string.gsub(m, '.', function(c) return string.format('%02x', string.byte(c)) end)
    end
    entry[#entry + 1] = m
    entry[#entry + 1] = 1
  end
  entry[#entry + 1] = values_of(tag, held)
  return entry
end

local out = {}
for i, key in ipairs(keys) do
  local kind, fields = 'none', nil
  if redis.call('type', key).ok == 'string' then
    kind = 'semaphore'
  else
    kind, fields = lock_kind(key)
  end
  if kind == 'semaphore' then
    out[i] = semaphore(key, tags[i], i == 1)
    if out[i] == nil then
      break
    end
  elseif kind == 'lock' then
    out[i] = plain(key, tags[i])
  elseif kind == 'rw' then
    out[i] = rw(key, tags[i], fields)
  else
    out[i] = 0
  end
  if looked >= budget then
    break
  end
end
return out
