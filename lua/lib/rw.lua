--[[ lib/rw.lua -- prepended at build time to every rw_*.lua.
  rw_kind(key)               'none', 'rw' (a hash with a mode field) or 'other'
  rw_refuse(key)             the reply of a release or renew when key is not a
                             held read-write lock ({0} free, {-1} another
                             kind), or nil when it is one
  rw_now()                   Redis' clock in ms
  rw_longest(key, prefix)    the longest pttl of any read hold's timeout key
                             <prefix>:<field>:rwlock_timeout:<k> (-2: none live)
  rw_readers(key)            how many reader fields the hash has ]]
local function rw_kind(key)
  local t = redis.call('type', key).ok
  if t == 'none' then
    return 'none'
  end
  if t == 'hash' and redis.call('hexists', key, 'mode') == 1 then
    return 'rw'
  end
  return 'other'
end

local function rw_refuse(key)
  local kind = rw_kind(key)
  if kind == 'none' then
    return {0}
  elseif kind == 'other' then
    return {-1}
  end
  return nil
end

local function rw_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function rw_longest(key, prefix)
  local best = -2
  local fields = redis.call('hgetall', key)
  for i = 1, #fields, 2 do
    local n = tonumber(fields[i + 1])
    if n and fields[i] ~= 'mode' and string.sub(fields[i], -6) ~= ':write' then
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
    if f ~= 'mode' and string.sub(f, -6) ~= ':write' then
      n = n + 1
    end
  end
  return n
end

