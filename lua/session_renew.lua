--[[ session_renew.lua -- a session's heartbeat for its holdings in one
  hash slot (on standalone Redis or Sentinel, all of them): each renewed
  by its kind's own renewal (lua/lib/renew_*.lua), all in one call.
  libs: common renew_lock rw renew_rw sem renew_sem
  KEYS    each holding's keys in turn, as its kind's renew script names
          them: lock: lock hash, holders, channel (lock_renew.lua); fair:
          lock hash, holders; read, write: lock hash, timeout key prefix,
          holders (rw_*_renew.lua); semaphore: count, permits, channel,
          holders (sem_renew.lua)
  ARGV[1] lease ms                    ARGV[2] the session's token name ("": auth off)
  ARGV[3] the holdings, three strings each, as one argument (unpack_list):
          kind ('lock', 'fair', 'read', 'write', 'semaphore'), owner, and
          the fencing token it was recorded with
  Returns {c1, c2, ...}  one per holding, in order: 1 renewed to ARGV[1];
                         0 gone, not renewed: released, its lease over,
                         held by another owner, or another holding of the
                         same owner (its fencing token is not the one
                         recorded), or its name holds another kind
  A holding's owner that is a field of the layout fails the whole call
  (dlockd checks owners before they are recorded). The cost is that of
  the holdings' own renewals: the caller bounds how many one call has. ]]
local lease, principal = tonumber(ARGV[1]), ARGV[2]
local listed = unpack_list(ARGV[3])
if not listed or #listed % 3 ~= 0 then
  return redis.error_reply('DLOCKD_ARGS malformed holdings list')
end

-- per kind: how many keys it has, which one is its holders' hash, and
-- the holders' field of owner's holding
local KINDS = {
  lock = {3, 2, ''}, fair = {2, 2, ''}, read = {3, 3, ''}, write = {3, 3, ':write'},
  semaphore = {4, 4, ''},
}

local function renew_one(kind, k, owner)
  if kind == 'lock' then
    return renew_lock(KEYS[k], KEYS[k + 1], KEYS[k + 2], lease, owner, principal)
  elseif kind == 'fair' then
    return renew_lock(KEYS[k], KEYS[k + 1], nil, lease, owner, principal)
  elseif kind == 'read' then
    return renew_read(KEYS[k], KEYS[k + 1], KEYS[k + 2], lease, owner, principal)
  elseif kind == 'write' then
    return renew_write(KEYS[k], KEYS[k + 1], KEYS[k + 2], lease, owner, principal)
  end
  return renew_sem(KEYS[k], KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], lease, owner, principal)
end

local out, k = {}, 1
for i = 1, #listed, 3 do
  local kind, owner, token = listed[i], listed[i + 1], tonumber(listed[i + 2])
  local row = KINDS[kind]
  if not row or not token or k + row[1] - 1 > #KEYS then
    return redis.error_reply('DLOCKD_ARGS holding ' .. ((i + 2) / 3) .. ' malformed')
  end
  local code, owners = 0, KEYS[k + row[2] - 1]
  -- a holding the owner took again after this one ended has another
  -- token: it is not the session's, and is left alone (a holders' hash
  -- that is no hash: not a lock's, gone as its renewal would say)
  if type_ok(owners, 'hash') then
    local now_token = owners_entry(owners, owner .. row[3])
    if not now_token or now_token == token then
      local r = renew_one(kind, k, owner)
      if r.err then
        return r
      end
      code = r[1] == 1 and 1 or 0
    end
  end
  out[#out + 1] = code
  k = k + row[1]
end
return out
