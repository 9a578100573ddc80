--[[ lib/fair.lua -- prepended at build time, after common, to the scripts
  whose libs: line names fair (the fair_*.lua).
  fair_scores(zset, members) each member's score in zset (false: none), in
                             one call (ZMSCORE; one ZSCORE each before Redis
                             6.2); nil when zset is not a zset (WRONGTYPE:
                             the read is the type check)
  fair_head(queue, zset, now, skip)
                             the first waiter in the queue (other than skip:
                             an owner, or a table whose keys are owners)
                             whose deadline is not past (false if none), its
                             index (the queue's length if none), the
                             queue's first entry, live or not (false: the
                             queue is empty), and the entry after the head
                             when its read showed it (false: the queue
                             ends there; nil: not read). Nil when the queue is not a
                             list, or zset not a zset (read only when the
                             queue has entries: an empty queue's deadlines
                             are neither read nor written): a script that
                             did not check their types refuses then ({-3}).
                             Reads only
  fair_purge(queue, zset, now, at)
                             drop queue heads whose deadline is past (the at
                             first ones, when fair_head gave at); returns the
                             live head (or false, or nothing when at is given)
  Both read the queue a run of entries at a time (LRANGE, ZMSCORE), and
  purge a run at a time (LTRIM, ZREM): a long run of dead heads (a dead
  dlockd's waiters) costs a few commands per hundred, once.
  fair_notify(prefix, w)     publish "0" to waiter w's own channel <prefix>:<w>
  fair_granted(prefix, w, lease)
                             the lock was just granted for lease ms: tell
                             the next in line w when the new holder's lease
                             ends (tell_lease), so that it looks again then
                             and not now
  fair_freed(prefix, w)      the lock is free: tell the queue head w, or with
                             nobody queued the plain lock's channel <prefix>,
                             where /locks waiters on the same name listen ]]
local FAIR_RUN = 256	-- queue entries read, or dropped, in one command

local function fair_scores(zset, members)
  local scores = redis.pcall('zmscore', zset, unpack(members))
  if type(scores) == 'table' and scores.err and string.find(scores.err, '^WRONGTYPE') then
    return nil	-- zset is not a zset
  elseif type(scores) ~= 'table' or scores.err then
    scores = {}
    for i = 1, #members do
      scores[i] = redis.call('zscore', zset, members[i])
    end
  end
  return scores
end

local function fair_skipped(skip, w)
  if type(skip) == 'table' then
    return skip[w]
  end
  return w == skip
end

local function fair_head(queue, zset, now, skip)
  -- the live head is most often first: read 4 entries, then runs twice as
  -- long as the last, up to FAIR_RUN
  local i, run, first = 0, 4, nil
  while true do
    local ws = typed_call('lrange', queue, i, i + run - 1)
    if not ws then
      return nil
    elseif first == nil then
      first = ws[1] or false
    end
    if #ws == 0 then
      return false, i, first
    end
    local scores = fair_scores(zset, ws)
    if not scores then
      return nil
    end
    for j = 1, #ws do
      if not fair_skipped(skip, ws[j]) and scores[j] and tonumber(scores[j]) > now then
        local after = ws[j + 1]
        if after == nil and #ws < run then
          after = false	-- the read came back short: the queue ends here
        end
        return ws[j], i + j - 1, first, after
      end
    end
    i = i + #ws
    run = math.min(2 * run, FAIR_RUN)
  end
end

local function fair_purge(queue, zset, now, at)
  local head
  if not at then
    head, at = fair_head(queue, zset, now)
  end
  while at > 0 do
    local ws = redis.call('lrange', queue, 0, math.min(at, FAIR_RUN) - 1)
    if #ws == 0 then
      break
    end
    redis.call('ltrim', queue, #ws, -1)
    redis.call('zrem', zset, unpack(ws))
    at = at - #ws
  end
  return head
end

local function fair_notify(prefix, w)
  if w then
    redis.call(PUBLISH, prefix .. ':' .. w, '0')
  end
end

local function fair_granted(prefix, w, lease)
  if w then
    tell_lease(prefix .. ':' .. w, lease)
  end
end

local function fair_freed(prefix, w)
  if w then
    fair_notify(prefix, w)
  else
    redis.call(PUBLISH, prefix, '0')
  end
end

