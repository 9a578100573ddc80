--[[ lib/common.lua -- prepended at build time to every script.
  First of all, every call's last argument ARGV[#ARGV] is its deadline in
  Redis' clock (ms). A call that reaches Redis after it (Redis was stalled)
  has already been answered 503 by dlockd: running it now would act behind
  the client's back (a stale release freeing the lock the client took
  again since), so it does nothing and returns an error.
  lease_at_least(key, lease)  make key live at least lease ms more (never
                              shorter than it already does); returns its pttl
  next_token(key, lease)      the next fencing token: INCR, except that a new
                              counter (INCR gave 1: never used, expired, or
                              lost with Redis' data) starts at Redis' clock in
                              microseconds, above every token handed out
                              before; Redisson's INCR stays monotonic too.
                              A counter that is not an integer counts as lost
                              (the script must not fail after its writes).
                              The counter lives as long as the longest lease
                              it granted, so a name leaves nothing behind in
                              Redis once its holders are gone ]]
do
  local t = redis.call('time')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > tonumber(ARGV[#ARGV]) then
    return redis.error_reply('DLOCKD_LATE the call reached redis after its deadline')
  end
end

local function lease_at_least(key, lease)
  local pttl = redis.call('pttl', key)
  if pttl < lease then
    redis.call('pexpire', key, lease)
    pttl = lease
  end
  return pttl
end

local function next_token(key, lease)
  -- a counter that is not an integer (someone wrote into dlockd's key)
  -- must not fail the script after its writes: it counts as lost
  local token = redis.pcall('incr', key)
  if type(token) ~= 'number' then
    redis.log(redis.LOG_WARNING, 'dlockd: fencing counter ' .. key .. ' was not an integer (' ..
      tostring(token.err) .. '); restarting it from the clock')
    redis.call('del', key)
    token = 1
  end
  if token == 1 then
    -- a new counter, or one expired or lost with Redis' data: start from
    -- the clock, above every token handed out before (each took a script
    -- run, so fewer than one per microsecond)
    local t = redis.call('time')
    token = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('set', key, token)
  end
  lease_at_least(key, lease)
  return token
end

