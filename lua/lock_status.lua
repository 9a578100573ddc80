--[[ lock_status.lua -- what an exclusive or fair lock is now: its holders,
  each with its holding's fencing token and token name, and a fair lock's
  queue. Only reads.
  libs: common fair
  flags: no-writes
  KEYS[1] lock hash N                 KEYS[2] holders dlockd_lock_owners:{N}
  KEYS[3] (fair locks) queue redisson_lock_queue:{N}
  KEYS[4] (fair locks) deadlines redisson_lock_timeout:{N}
  ARGV[1] (fair locks) how many queue places to list, at most
  ARGV[2] (fair locks) how many queue entries to look at for them, at most
  Returns {locked, pttl, holders, places, queued, values}
            locked 1 or 0; pttl of N (-2: absent)
            holders {owner, holds, token, principal, ...}: four per field of
              N; token 0 and principal '' when the holders' hash has no
              entry for it (a Redisson holder), principal '' when the
              holding was made with auth off
            places {owner, left_ms, ...}: the first ARGV[1] live places of
              the queue in its order, each with its deadline less Redis'
              now (places past their deadline, which the next acquire or
              release drops, are left out), among its first ARGV[2]
              entries (a long run of dead places behind a live head --
              a dead dlockd's waiters -- costs no more than that); {}
              for a plain lock
            queued: how many live places the queue has (0 for a plain lock)
            values: each holder's value, in holders' order (false: none)
          {-1}  N is a read-write lock
          {-3}  N, its holders' hash or its queue holds something that is
                not a lock's ]]
local kind = lock_kind(KEYS[1])
if kind == 'rw' then
  return {-1}
elseif kind == 'other' or not type_ok(KEYS[2], 'hash') or
       (KEYS[3] and (not type_ok(KEYS[3], 'list') or not type_ok(KEYS[4], 'zset'))) then
  return {-3}
end
local holders, fields = {}, {}
if kind == 'lock' then
  local f = redis.call('hgetall', KEYS[1])
  for i = 1, #f, 2 do
    fields[#fields + 1] = f[i]
    local token, principal = owners_entry(KEYS[2], f[i])
    holders[#holders + 1] = f[i]
    holders[#holders + 1] = tonumber(f[i + 1])
    holders[#holders + 1] = token or 0
    holders[#holders + 1] = principal or ''
  end
end
local places, queued = {}, 0
if KEYS[3] then
  local now = now_ms()
  local max, look = tonumber(ARGV[1]), tonumber(ARGV[2])
  queued = redis.call('zcount', KEYS[4], '(' .. now, '+inf')
  local i = 0
  while #places < 2 * max and i < look do
    local ws = redis.call('lrange', KEYS[3], i, math.min(i + max, look) - 1)
    if #ws == 0 then
      break
    end
    local scores = fair_scores(KEYS[4], ws)
    for j = 1, #ws do
      local deadline = tonumber(scores[j] or '0')
      if deadline > now and #places < 2 * max then
        places[#places + 1] = ws[j]
        places[#places + 1] = deadline - now
      end
    end
    i = i + #ws
  end
end
return {kind == 'lock' and 1 or 0, redis.call('pttl', KEYS[1]), holders, places, queued,
        owners_values(KEYS[2], fields)}
