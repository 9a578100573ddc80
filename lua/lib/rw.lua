--[[ lib/rw.lua -- prepended at build time, after common, to the scripts
  whose libs: line names rw (those reading read-write locks).
  rw_scan(key, tag, fields)  key is a read-write lock (lock_kind 'rw', which
                             gave its fields, or nil to read them): what
                             rw_purge would keep, from reads alone: a table
                             {mode, writers = how many writer fields,
                             written = those fields, each {field, count},
                             readers = the reader fields in hash order, each
                             {field, n = its count, live = {{k, pttl}, ...}
                             its holds whose timeout key
                             <tag>:<field>:rwlock_timeout:<k> is there}}
  rw_scan_left(s, owner)     from scan s, as if owner gave up its last live
                             read hold: how many readers keep a live hold,
                             and the longest pttl of those holds (-2: none)
  rw_purge(key, tag, owners, s)
                             (s: its rw_scan, or nil to scan now) drop
                             every read hold whose timeout key
                             <tag>:<field>:rwlock_timeout:<k> is gone (its
                             lease ran out), so an expired reader counts for
                             nothing: a reader with no live hold loses its
                             field, one with some keeps their number and
                             their keys are renumbered 1..n with their own
                             TTLs (RENAME keeps it), as Redisson numbers
                             them, and a new change number (owners_bump). A read lock with no reader left is
                             deleted; one with fewer readers lives as long as
                             its longest hold (as Redisson's unlock sets it).
                             The holders' hash owners follows (owners_sync).
                             Returns 'none' when key is gone, else 'rw'.
  rw_held_refusal(key, tag, owner, owners)
                             held_refusal(key, 'rw', owner, owners), then
                             rw_purge: nil and the scan s it purged by to
                             go on, else the reply to give at once
  rw_longest_but(s, owner)   from scan s: the longest pttl of the live
                             holds of every reader but owner (nil: of
                             all), -2 when there is none
  rw_live(s)                 from scan s: the live read holds of the lock,
                             and a table of each reader's, by field
  rw_readers(key)            how many reader fields the hash has
  A scan costs one PTTL per read hold the hash counts (live or not): what
  keeps every call's cost bounded is the cap on read holds a read acquire
  enforces (rw_read_acquire.lua), so a script scans once, never twice.
  rw_not_writer(key, owner)  the refusal of a write release or renew by an
                             owner that does not write: {-2, why, n} with why
                             5 (a writer holds it), 3 (n readers do) or 4
                             (the caller reads, and n other readers) ]]
local function rw_is_reader(field)
  return field ~= 'mode' and string.sub(field, -6) ~= ':write'
end

local function rw_scan(key, tag, fields)
  fields = fields or redis.call('hgetall', key)
  local s = {writers = 0, written = {}, readers = {}}
  for i = 1, #fields, 2 do
    local f = fields[i]
    if f == 'mode' then
      s.mode = fields[i + 1]
    elseif not rw_is_reader(f) then
      s.writers = s.writers + 1
      s.written[s.writers] = {f, tonumber(fields[i + 1])}
    else
      local r = {field = f, n = tonumber(fields[i + 1]), live = {}}
      local base = tag .. ':' .. f .. ':rwlock_timeout:'
      for k = 1, r.n do
        local t = redis.call('pttl', string.format('%s%d', base, k))
        if t ~= -2 then
          r.live[#r.live + 1] = {k, t}
        end
      end
      s.readers[#s.readers + 1] = r
    end
  end
  return s
end

local function rw_scan_left(s, owner)
  local readers, longest = 0, -2
  for _, r in ipairs(s.readers) do
    local n = #r.live
    if r.field == owner then
      n = n - 1	-- its last one goes (rw_purge renumbers the rest 1..n)
    end
    if n > 0 then
      readers = readers + 1
      for j = 1, n do
        if r.live[j][2] > longest then
          longest = r.live[j][2]
        end
      end
    end
  end
  return readers, longest
end

local function rw_purge(key, tag, owners, s)
  s = s or rw_scan(key, tag)
  local readers, dropped, longest = 0, false, -2
  for _, r in ipairs(s.readers) do
    for j, h in ipairs(r.live) do
      if h[1] ~= j then
        local base = tag .. ':' .. r.field .. ':rwlock_timeout:'
        redis.call('rename', base .. h[1], base .. j)
      end
      if h[2] > longest then
        longest = h[2]
      end
    end
    if #r.live == 0 then
      redis.call('hdel', key, r.field)
      dropped = true
    else
      readers = readers + 1
      if #r.live ~= r.n then
        redis.call('hset', key, r.field, #r.live)
        owners_bump(owners, r.field)	-- an undo finds the holding changed
        dropped = true
      end
    end
  end
  if readers == 0 and s.writers == 0 then
    redis.call('del', key, owners)
    return 'none'
  end
  if dropped and s.mode == 'read' and longest > 0 then
    redis.call('pexpire', key, longest)
  end
  if dropped then
    owners_sync(owners, key)
  end
  return 'rw'
end

local function rw_held_refusal(key, tag, owner, owners)
  local refusal, fields = held_refusal(key, 'rw', owner, owners)
  if refusal then
    return refusal
  end
  local s = rw_scan(key, tag, fields)
  if rw_purge(key, tag, owners, s) == 'none' then
    return {0}
  end
  return nil, s
end

local function rw_longest_but(s, owner)
  local best = -2
  for _, r in ipairs(s.readers) do
    if r.field ~= owner then
      for _, h in ipairs(r.live) do
        if h[2] > best then
          best = h[2]
        end
      end
    end
  end
  return best
end

local function rw_live(s)
  local total, by = 0, {}
  for _, r in ipairs(s.readers) do
    total = total + #r.live
    by[r.field] = #r.live
  end
  return total, by
end

local function rw_readers(key)
  local n = 0
  for _, f in ipairs(redis.call('hkeys', key)) do
    if rw_is_reader(f) then
      n = n + 1
    end
  end
  return n
end

local function rw_not_writer(key, owner)
  if redis.call('hget', key, 'mode') == 'write' then
    return {-2, 5, 0}
  end
  local n = rw_readers(key)
  if redis.call('hexists', key, owner) == 1 then
    return {-2, 4, n - 1}
  end
  return {-2, 3, n}
end
