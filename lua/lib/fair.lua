--[[ lib/fair.lua -- prepended at build time, after common, to the scripts
  whose libs: line names fair (the fair_*.lua).
  fair_head(queue, zset, now, skip)
                             the first waiter in the queue (other than skip)
                             whose deadline is not past (false if none), and
                             its index (the queue's length if none). Reads only
  fair_purge(queue, zset, now, at)
                             drop queue heads whose deadline is past (the at
                             first ones, when fair_head gave at); returns the
                             live head (or false, or nothing when at is given)
  fair_notify(prefix, w)     publish "0" to waiter w's own channel <prefix>:<w>
  fair_freed(prefix, w)      the lock is free: tell the queue head w, or with
                             nobody queued the plain lock's channel <prefix>,
                             where /locks waiters on the same name listen ]]
local function fair_head(queue, zset, now, skip)
  local i = 0
  while true do
    local w = redis.call('lindex', queue, i)
    if not w then
      return false, i
    end
    if w ~= skip then
      local deadline = redis.call('zscore', zset, w)
      if deadline and tonumber(deadline) > now then
        return w, i
      end
    end
    i = i + 1
  end
end

local function fair_purge(queue, zset, now, at)
  local head
  if not at then
    head, at = fair_head(queue, zset, now)
  end
  for _ = 1, at do
    redis.call('zrem', zset, redis.call('lpop', queue))
  end
  return head
end

local function fair_notify(prefix, w)
  if w then
    redis.call(PUBLISH, prefix .. ':' .. w, '0')
  end
end

local function fair_freed(prefix, w)
  if w then
    fair_notify(prefix, w)
  else
    redis.call(PUBLISH, prefix, '0')
  end
end

