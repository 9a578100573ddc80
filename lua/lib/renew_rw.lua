--[[ lib/renew_rw.lua -- the renewals of a read-write lock's holdings,
  shared by rw_read_renew.lua, rw_write_renew.lua (one holding each) and
  session_renew.lua (a session's, many in one call). After common and rw.
  renew_read(lock, tag, owners, lease, owner, principal, floor)
                              renew every read hold of owner to lease ms:
                              rw_read_renew.lua's checks and replies
  renew_write(lock, tag, owners, lease, owner, principal, floor)
                              renew owner's write holding to lease ms, or
                              as long as its own read holds last:
                              rw_write_renew.lua's checks and replies
  With floor (a session's), a holding's lease is only ever made longer,
  as renew_lock's (lib/renew_lock.lua). ]]
local function renew_read(lock, tag, owners, lease, owner, principal, floor)
  local refusal, s = rw_held_refusal(lock, tag, owner, owners)
  if refusal then
    return refusal
  end
  if floor then
    -- the lease its holds have: the scan read each one's
    local has, live = -2, 0
    for _, r in ipairs(s.readers) do
      if r.field == owner then
        for _, h in ipairs(r.live) do
          has = math.max(has, h[2])
        end
        live = #r.live
      end
    end
    if has >= lease and not owners_refused(owners, owner, principal) then
      owners_renewed(owners, owner, live, floor)
      return {1, has}
    end
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
  owners_renewed(owners, owner, holds, floor)
  owners_sync(owners, lock)
  return {1, lease}
end

local function renew_write(lock, tag, owners, lease, owner, principal, floor)
  local refusal, s = rw_held_refusal(lock, tag, owner, owners)
  if refusal then
    return refusal
  end
  local holds = tonumber(redis.call('hget', lock, owner .. ':write'))
  if not holds then
    return rw_not_writer(lock, owner)
  elseif owners_refused(owners, owner .. ':write', principal) then
    return {-2, 7, 0}
  elseif floor then
    local pttl = redis.call('pttl', lock)	-- after the scan's purge
    if pttl >= lease then
      owners_renewed(owners, owner .. ':write', holds, floor)
      return {1, pttl}
    end
  end
  -- the owner's own read holds keep N, and so its write holding, longer:
  -- that is the lease the writer has
  local longest = rw_longest_but(s, nil)
  local pttl = longest > lease and longest or lease
  redis.call('pexpire', lock, pttl)
  owners_renewed(owners, owner .. ':write', holds, floor)
  owners_sync(owners, lock)
  return {1, pttl}
end
