--[[ session_renew.lua -- a session's heartbeat for its holdings in one
  hash slot (on standalone Redis or Sentinel, all of them): each renewed
  by its kind's own renewal (lua/lib/renew_*.lua), all in one call.
  libs: common rw renew_lock renew_rw sem renew_sem
  flags: allow-oom
  KEYS    the holdings' locks on a Redis Cluster (elsewhere only the
          first's): Redis routes and checks the call by them, so a slot
          being migrated makes it redirect the call (ASK, TRYAGAIN) rather
          than run it without the holdings moved already, which would look
          gone. The script reads no key from KEYS.
  ARGV[1] lease ms; 0: renew nothing, only tell which holdings are still
          the session's (its end releases those)
  ARGV[2] the session's token name ("": auth off)
  ARGV[3] the holdings as one argument (unpack_list), each as its kind
          ('lock', 'fair', 'read', 'write', 'semaphore'), owner, the
          fencing token it was recorded with, then its keys, as its kind's
          renew script names them: lock: lock hash, holders, channel
          (lock_renew.lua); fair: lock hash, holders, channel prefix,
          queue (lock_renew.lua); read, write: lock
          hash, timeout key prefix, holders (rw_*_renew.lua); semaphore:
          count, permits, channel, holders (sem_renew.lua). Every one is
          in KEYS[1]'s slot (the caller groups them so): as Redisson's
          rwlock_timeout keys, built from a prefix, the others need not
          be declared, and one argument carries them however many there
          are
  ARGV[4] when the session's lease ends, in Redis' clock (ms; session_read
          gives it; "0": not known): no holding is renewed past it, and
          none at all once it is over (Redis stalled between the two
          calls: as with lease 0, only told). A renewal only ever makes a
          holding's lease longer: a call that came late (its heartbeat
          answered 503, or slow) never cuts what a later heartbeat gave,
          whose client counts on it
  Returns {c1, c2, ..., lease}  one per holding, in order: 1 renewed to
                         lease at least (ARGV[1], or less: what is left of
                         the session's; lease 0: still the session's, not
                         renewed);
                         0 gone, not renewed: released, its lease over,
                         held by another owner, or another holding of the
                         same owner (its fencing token is not the one
                         recorded), or its name holds another kind;
                         then the lease the renewed ones got
  A holding's owner that is a field of the layout fails the whole call
  (dlockd checks owners before they are recorded). The cost is that of
  the holdings' own renewals: the caller bounds how many one call has. ]]
local lease, principal = tonumber(ARGV[1]), ARGV[2]
local listed = unpack_list(ARGV[3])
if not listed then
  return redis.error_reply('DLOCKD_ARGS malformed holdings list')
end
local ends = tonumber(ARGV[4] or '0') or 0
if lease > 0 and ends > 0 then
  -- a millisecond short of the session's end: Redis counts a lease from
  -- its clock at the command, this script's clock is floored
  local left = ends - now_ms() - 1
  if left < lease then
    lease = left > 0 and left or 0
  end
end

-- per kind: how many keys it has, which one is its holders' hash, and
-- the holders' field of owner's holding
local KINDS = {
  lock = {3, 2, ''}, fair = {4, 2, ''}, read = {3, 3, ''}, write = {3, 3, ':write'},
  semaphore = {4, 4, ''},
}

-- the holding of kind and owner whose keys are listed[k], listed[k + 1], ...
local function renew_one(kind, k, owner)
  local a, b, c, d = listed[k], listed[k + 1], listed[k + 2], listed[k + 3]
  if kind == 'lock' then
    return renew_lock(a, b, c, lease, owner, principal, nil, true)
  elseif kind == 'fair' then
    return renew_lock(a, b, c, lease, owner, principal, d, true)
  elseif kind == 'read' then
    return renew_read(a, b, c, lease, owner, principal, true)
  elseif kind == 'write' then
    return renew_write(a, b, c, lease, owner, principal, true)
  end
  return renew_sem(a, b, c, d, lease, owner, principal, true)
end

local out, i = {}, 1
while i <= #listed do
  local kind, owner, token = listed[i], listed[i + 1], tonumber(listed[i + 2] or '')
  local row = KINDS[kind]
  if not row or not token or i + 2 + row[1] > #listed then
    return redis.error_reply('DLOCKD_ARGS holding ' .. (#out + 1) .. ' malformed')
  end
  local code, owners = 0, listed[i + 2 + row[2]]
  -- a holding the owner took again after this one ended has another
  -- token: it is not the session's, and is left alone (a holders' hash
  -- that is no hash: not a lock's, gone as its renewal would say)
  if type_ok(owners, 'hash') then
    local now_token = owners_entry(owners, owner .. row[3])
    if lease == 0 then
      code = (not now_token or now_token == token) and 1 or 0
    elseif not now_token or now_token == token then
      local r = renew_one(kind, i + 3, owner)
      if r.err then
        return r
      end
      code = r[1] == 1 and 1 or 0
    end
  end
  out[#out + 1] = code
  i = i + 3 + row[1]
end
out[#out + 1] = lease
return out
