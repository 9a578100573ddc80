--[[ lib/renew_rw.lua -- the renewals of a read-write lock's holdings,
  shared by rw_read_renew.lua, rw_write_renew.lua (one holding each) and
  session_renew.lua (a session's, many in one call). After common and rw.
  renew_read(lock, tag, owners, lease, owner, principal)
                              renew every read hold of owner to lease ms:
                              rw_read_renew.lua's checks and replies
  renew_write(lock, tag, owners, lease, owner, principal)
                              renew owner's write holding to lease ms, or
                              as long as its own read holds last:
                              rw_write_renew.lua's checks and replies ]]
local function renew_read(lock, tag, owners, lease, owner, principal)
  local refusal, s = rw_held_refusal(lock, tag, owner, owners)
  if refusal then
    return refusal
  end
  local holds = tonumber(redis.call('hget', lock, owner))
  if not holds then
    if redis.call('hget', lock, 'mode') == 'write' and
       redis.call('hexists', lock, owner .. ':write') == 0 then
      return {-2}
    end
    return {0}
  elseif owners_refused(owners, owner, principal) then
    return {-2, 7, 0}
  end
  for k = 1, holds do
    redis.call('set', tag .. ':' .. owner .. ':rwlock_timeout:' .. k, 1, 'px', lease)
  end
  if redis.call('hget', lock, 'mode') == 'read' then
    -- N lives exactly as long as its longest hold, so a shorter heartbeat
    -- may end it sooner (as Redisson's unlock recomputes it)
    local others = rw_longest_but(s, owner)
    redis.call('pexpire', lock, others > lease and others or lease)
  else
    lease_at_least(lock, lease)	-- the writer's own lease is never cut
  end
  owners_bump(owners, owner)
  owners_sync(owners, lock)
  return {1, lease}
end

local function renew_write(lock, tag, owners, lease, owner, principal)
  local refusal, s = rw_held_refusal(lock, tag, owner, owners)
  if refusal then
    return refusal
  end
  if redis.call('hexists', lock, owner .. ':write') == 0 then
    return rw_not_writer(lock, owner)
  elseif owners_refused(owners, owner .. ':write', principal) then
    return {-2, 7, 0}
  end
  -- the owner's own read holds keep N, and so its write holding, longer:
  -- that is the lease the writer has
  local longest = rw_longest_but(s, nil)
  local pttl = longest > lease and longest or lease
  redis.call('pexpire', lock, pttl)
  owners_bump(owners, owner .. ':write')
  owners_sync(owners, lock)
  return {1, pttl}
end
