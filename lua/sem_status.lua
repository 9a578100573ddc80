--[[ sem_status.lua -- what a semaphore is now: its limit, free permits,
  holders (each with token, token name, lease left and holder value) and
  how many wait. Only reads: permits past their lease end count as free.
  libs: common sem
  flags: no-writes
  KEYS[1] count N                     KEYS[2] permits {N}:timeout
  KEYS[3] holders dlockd_lock_owners:{N}
  KEYS[4] waiting owners dlockd_sem_waiters:{N}
  KEYS[5] fencing counter redisson_lock_token:{N}
  ARGV[1] how many holders to list, at most
  ARGV[2] an owner asked about ('': none)
  Returns {locked, pttl, holders, limit, free, waiting, out, last, asked}
            locked 1 when a permit is out; pttl the longest lease left
            (-1: a permit without one; 0: none out)
            holders {owner, token, principal, ttl_ms, value, redisson, ...}:
              six per permit, the ARGV[1] ending first; owner is the
              member (a Redisson permit's id in hex, redisson 1), token 0
              and principal '' for a permit dlockd has no entry of, value
              false when none
            limit the permits in all (0: no semaphore), free how many are
            free, waiting how many wait (on any dlockd), out the permits out;
            last the newest token granted (0: none kept), so that a watch's
            index moves with every permit taken, listed or not; asked 1
            when ARGV[2] holds a live permit, listed or not
          {-1}  N is a lock
          {-3}  a key holds something that is not a semaphore's ]]
local refusal = sem_refusal(KEYS[1], KEYS[2], KEYS[5], KEYS[3], KEYS[4])
if refusal then
  return refusal
end
local now = now_ms()
local expired = redis.call('zcount', KEYS[2], '-inf', now)
local out = redis.call('zcard', KEYS[2]) - expired
local free = redis.call('get', KEYS[1])
local limit = 0
if free then
  free = tonumber(free) + expired
  limit = free + out
else
  free = 0
end
local holders, pttl = {}, 0
local v = redis.call('zrangebyscore', KEYS[2], '(' .. now, '+inf', 'withscores', 'limit', 0,
                     tonumber(ARGV[1]))
for i = 1, #v, 2 do
  local m, ends = v[i], tonumber(v[i + 1])
  local left = ends - now
  if ends >= SEM_NO_EXPIRY then
    left = -1
  end
  if pttl ~= -1 and (left == -1 or left > pttl) then
    pttl = left
  end
  local token, principal = owners_entry(KEYS[3], m)
  local redisson = 0
  if not string.match(m, '^[%w%._:%-]+$') then
    redisson = 1
    m = string.gsub(m, '.', function(c) return string.format('%02x', string.byte(c)) end)
  end
  holders[#holders + 1] = m
  holders[#holders + 1] = token or 0
  holders[#holders + 1] = principal or ''
  holders[#holders + 1] = left
  holders[#holders + 1] = redis.call('hget', KEYS[3], '=' .. v[i])
  holders[#holders + 1] = redisson
end
local waiting = redis.call('zcount', KEYS[4], '(' .. now, '+inf')
local asked = 0
if ARGV[2] ~= '' then
  local score = redis.call('zscore', KEYS[2], ARGV[2])
  asked = score and tonumber(score) > now and 1 or 0
end
return {out > 0 and 1 or 0, pttl, holders, limit, free, waiting, out,
        counter_seen[KEYS[5]] or 0, asked}
