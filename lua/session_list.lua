--[[ session_list.lua -- the open sessions of every token name, for an
  admin's listing: read from the counts session_count.lua keeps (one
  slot), trimmed of the ended ones on the way.
  libs: common sessions
  flags: allow-oom
  KEYS[1] the token names dlockd_sessions:{dlockd_sessions}
  ARGV[1] the prefix of the token names' sets (KEYS[1] .. ':')
  ARGV[2] how many sessions to return, at most
  Returns {all, name1, id1, left1, name2, id2, left2, ...}
          all every open session; then up to ARGV[2] sessions: the token
          name each was made under, its id and its lease left in ms,
          soonest end first per token name
  Cost: one trim per token name, and the sessions returned. ]]
local now = now_ms()
local max = tonumber(ARGV[2])
local all, open = sessions_trim(KEYS[1], ARGV[1], now)
local out = {all}
for _, o in ipairs(open) do
  local room = max - (#out - 1) / 3
  if room <= 0 then
    break
  end
  local v = redis.call('zrange', o[2], 0, room - 1, 'withscores')
  for i = 1, #v, 2 do
    out[#out + 1] = o[1]
    out[#out + 1] = v[i]
    out[#out + 1] = tonumber(v[i + 1]) - now
  end
end
return out
