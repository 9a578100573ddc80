--[[ lib/sessions.lua -- the counts of open sessions (session_count.lua
  keeps them, session_list.lua reads them), all in one slot:
    names             a set: the token names that have an open session
    prefix .. name    a zset: that token name's open session ids, scored by
                      lease end (Redis' clock, ms)
  sessions_trim(names, prefix, now)
                              drop every ended session (and each token
                              name left with none); returns how many are
                              open in all, and the token names that have
                              one with each one's zset key ]]
local function sessions_trim(names, prefix, now)
  local all, open = 0, {}
  for _, name in ipairs(redis.call('smembers', names)) do
    local key = prefix .. name
    redis.call('zremrangebyscore', key, '-inf', now)
    local n = redis.call('zcard', key)
    if n == 0 then
      redis.call('srem', names, name)
    else
      open[#open + 1] = {name, key, n}
    end
    all = all + n
  end
  return all, open
end
