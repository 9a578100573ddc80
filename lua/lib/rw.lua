--[[ lib/rw.lua -- prepended at build time to every rw_*.lua.
  rw_now()                   Redis' clock in ms
  rw_purge(key, tag)         key is a read-write lock (lock_kind 'rw'): drop
                             every read hold whose timeout key
                             <tag>:<field>:rwlock_timeout:<k> is gone (its
                             lease ran out), so an expired reader counts for
                             nothing: a reader with no live hold loses its
                             field, one with some keeps their number and
                             their keys are renumbered 1..n with their own
                             TTLs (RENAME keeps it), as Redisson numbers
                             them. A read lock with no reader left is
                             deleted; one with fewer readers lives as long as
                             its longest hold (as Redisson's unlock sets it).
                             Returns 'none' when key is gone, else 'rw'.
  rw_held_refusal(key, tag, owner)
                             held_refusal(key, 'rw', owner), then rw_purge:
                             nil to go on, else the reply to give at once
  rw_longest(key, prefix)    the longest pttl of any read hold's timeout key
                             <prefix>:<field>:rwlock_timeout:<k> (-2: none live)
  rw_readers(key)            how many reader fields the hash has
  rw_not_writer(key, owner)  the refusal of a write release or renew by an
                             owner that does not write: {-2, why, n} with why
                             5 (a writer holds it), 3 (n readers do) or 4
                             (the caller reads, and n other readers) ]]
local function rw_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function rw_is_reader(field)
  return field ~= 'mode' and string.sub(field, -6) ~= ':write'
end

local function rw_purge(key, tag)
  local fields = redis.call('hgetall', key)
  local mode, readers, writer, dropped, longest = nil, 0, false, false, -2
  for i = 1, #fields, 2 do
    local f = fields[i]
    if f == 'mode' then
      mode = fields[i + 1]
    elseif not rw_is_reader(f) then
      writer = true
    else
      local n, live = tonumber(fields[i + 1]), 0
      local base = tag .. ':' .. f .. ':rwlock_timeout:'
      for k = 1, n do
        local t = redis.call('pttl', base .. k)
        if t ~= -2 then
          live = live + 1
          if live ~= k then
            redis.call('rename', base .. k, base .. live)
          end
          if t > longest then
            longest = t
          end
        end
      end
      if live == 0 then
        redis.call('hdel', key, f)
        dropped = true
      else
        readers = readers + 1
        if live ~= n then
          redis.call('hset', key, f, live)
          dropped = true
        end
      end
    end
  end
  if readers == 0 and not writer then
    redis.call('del', key)
    return 'none'
  end
  if dropped and mode == 'read' and longest > 0 then
    redis.call('pexpire', key, longest)
  end
  return 'rw'
end

local function rw_held_refusal(key, tag, owner)
  local refusal = held_refusal(key, 'rw', owner)
  if refusal then
    return refusal
  end
  if rw_purge(key, tag) == 'none' then
    return {0}
  end
  return nil
end

local function rw_longest(key, prefix)
  local best = -2
  local fields = redis.call('hgetall', key)
  for i = 1, #fields, 2 do
    local n = tonumber(fields[i + 1])
    if n and rw_is_reader(fields[i]) then
      for k = n, 1, -1 do
        local t = redis.call('pttl', prefix .. ':' .. fields[i] .. ':rwlock_timeout:' .. k)
        if t > best then
          best = t
        end
      end
    end
  end
  return best
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
