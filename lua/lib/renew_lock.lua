--[[ lib/renew_lock.lua -- the renewal of a plain or fair lock's holding,
  shared by lock_renew.lua (one holding) and session_renew.lua (a
  session's, many in one call). After common.
  renew_lock(lock, owners, channel, lease, owner, principal, queue, floor)
                              set the lease of owner's holding of lock to
                              lease ms: the checks, replies and publishing
                              of lock_renew.lua, whose header says them
                              (channel: a plain lock's, a fair lock's
                              channel prefix with its queue, or nil: say
                              nothing); with floor, only ever longer (a
                              session's: a late call never cuts what a
                              later heartbeat gave), {1, the lease it has}
                              when it has lease already; returns the reply ]]
local function renew_lock(lock, owners, channel, lease, owner, principal, queue, floor)
  local refusal, fields, pttl = held_refusal(lock, 'lock', owner, owners)
  if refusal then
    return refusal
  end
  local holds = tonumber(field_of(fields, owner))
  if not holds then
    return {-2}
  elseif owners_refused(owners, owner, principal) then
    return {-2, 7, 0}
  elseif floor and pttl >= lease then
    owners_renewed(owners, owner, holds, floor)
    return {1, pttl}
  end
  if channel and pttl > lease then
    -- a fair lock's queue head is told the new lease on its own channel,
    -- as at a grant; with nobody queued,
    -- or a queue of another type, "0" goes where a plain lock's would
    local head = queue and typed_call('lindex', queue, 0)
    if head then
      tell_lease(channel .. ':' .. head, lease)
    else
      redis.call(PUBLISH, channel, 0)
    end
  end
  redis.call('pexpire', lock, lease)
  owners_renewed(owners, owner, holds, floor)
  owners_sync(owners, lock)
  return {1, lease}
end
