--[[ lib/renew_sem.lua -- the renewal of a semaphore permit, shared by
  sem_renew.lua (one permit) and session_renew.lua (a session's holdings,
  many in one call). After common and sem.
  renew_sem(n, permits, channel, owners, lease, owner, principal, floor)
                              set the lease of owner's permit to lease ms:
                              sem_renew.lua's checks, replies and
                              publishing; with floor (a session's), only
                              ever longer, as renew_lock's; returns the
                              reply ]]
local function renew_sem(n, permits, channel, owners, lease, owner, principal, floor)
  local now = now_ms()
  local refusal, score = sem_held_refusal(n, permits, owners, owner, principal, now)
  if refusal then
    return refusal
  end
  if floor and tonumber(score) >= now + lease then
    owners_renewed(owners, owner, 1, floor)
    return {1, tonumber(score) - now}
  end
  if tonumber(score) > now + lease then
    redis.call(PUBLISH, channel, '0')
  end
  redis.call('zadd', permits, now + lease, owner)
  owners_renewed(owners, owner, 1, floor)
  lease_at_least(owners, lease)
  return {1, lease}
end
