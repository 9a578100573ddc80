--[[ lib/common.lua -- prepended at build time to every script.
  lease_at_least(key, lease)  make key live at least lease ms more (never
                              shorter than it already does); returns its pttl ]]
local function lease_at_least(key, lease)
  local pttl = redis.call('pttl', key)
  if pttl < lease then
    redis.call('pexpire', key, lease)
    pttl = lease
  end
  return pttl
end

