--[[ lib/fair.lua -- prepended at build time to every fair_*.lua.
  fair_now()                 Redis' clock in ms (every instance agrees on it)
  fair_purge(queue, zset, now)
                             drop queue heads whose deadline is past; returns
                             the live head (or false)
  fair_notify(prefix, w)     publish "0" to waiter w's own channel <prefix>:<w> ]]
local function fair_now()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function fair_purge(queue, zset, now)
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then
      return false
    end
    local deadline = redis.call('zscore', zset, head)
    if deadline and tonumber(deadline) > now then
      return head
    end
    redis.call('lpop', queue)
    redis.call('zrem', zset, head)
  end
end

local function fair_notify(prefix, w)
  if w then
    redis.call('publish', prefix .. ':' .. w, '0')
  end
end

