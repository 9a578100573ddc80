--[[ lib/common.lua -- prepended at build time to every script: each names
  it first on its libs: line (lua/gen-scripts.sh says how).
  First of all, every call's last argument ARGV[#ARGV] is its deadline in
  Redis' clock (ms). A call that reaches Redis after it (Redis was stalled)
  has already been answered 503 by dlockd: running it now would act behind
  the client's back (a stale release freeing the lock the client took
  again since), so it changes nothing and returns an error. The check
  comes before the call's first command that is not a read (below: the
  scripts' redis.call and redis.pcall are this library's, which make it);
  a call that only reads (a refusal, a status) changes nothing whenever
  it runs, so it neither reads the clock for the check nor fails late:
  a refused try is a command cheaper. The argument
  before it, ARGV[#ARGV - 1], is the command a script publishes with
  (PUBLISH below): 'publish', or 'spublish' where waiters listen on
  sharded channels (a Redis Cluster's, as Redisson's scripts are told).
  now_ms(), now_us()          Redis' clock in ms, in us (every instance
                              agrees on it), read once a call, when first
                              wanted
  redis.call, redis.pcall     Redis' own, but the first command of a call
                              that is not in READS (a write, a publish, or
                              any command not listed) is preceded by the
                              deadline check: past it, the call fails with
                              DLOCKD_LATE before anything is written. The
                              names are this library's locals, so no script
                              reaches Redis around them
  call_begin(argv)            the start of every call, before the script's
                              own first line (lua/gen-scripts.sh puts it
                              there): takes Redis' own call and pcall (and
                              at its first call Lua's functions, string,
                              tonumber, ..., into locals), takes the
                              deadline, forgets the last call's clock,
                              checks the publish command; nil to go on, else
                              the error to return
  ms(n)                       n (whole ms) as a command's argument: a Lua
                              number Redis writes itself with %.17g
                              (glibc's floating-point printing), dearer than
                              this %d
  tell_lease(channel, lease)  publish "-<lease>" on a fair-lock waiter's own
                              channel: the holder's lease is now lease ms,
                              look again when it ends (a dlockd waiter arms
                              its retry timer; Redisson's listeners act on
                              0 and 1 alone and ignore it)
  bounded_lease(lease, ends)   the lease (ms, text) to grant, no longer than
                              the time left until ends (Redis' clock, ms;
                              "0": no bound), at least 1 ms: a session's
                              end, so that a grant Redis runs late never
                              outlives its session (an end already past
                              grants 1 ms, which dlockd counts as over and
                              takes back)
  lease_at_least(key, lease, pttl)
                              make key live at least lease ms more (never
                              shorter than it already does); returns its
                              pttl (pttl: key's, when the caller read it)
  next_token(key, lease, sole)
                              the next fencing token: the counter + 1 (the
                              value counter_ok read), raised to Redis'
                              clock in microseconds when below it, SET with
                              the longer of lease and the life it had. Every
                              token handed out was at most the clock of its
                              grant (or its predecessor + 1: fewer than one
                              grant per microsecond), so a counter that is
                              new, expired, lost with Redis' data or restored
                              from an older snapshot or AOF never goes back;
                              Redisson's INCR stays monotonic too. The
                              counter lives as long as the longest lease it
                              granted to a holding that may still be live,
                              so a name leaves nothing behind in Redis once
                              its holders are gone. With sole (the lock had
                              no holding at all: this is its only one) the
                              life it had is of holdings that are over, and
                              the counter is SET with lease alone (no PTTL;
                              any later token is still above this one: it
                              is at most a few microseconds past the clock,
                              and the counter lives at least a millisecond)
  integer_text(v)             v is an integer as Redis writes one (INCR,
                              HINCRBY take it: no leading zero, no '+',
                              no '-0') that a Lua number holds exactly
                              (under 2^53 either way): a hold count, a
                              fencing counter, a token
  lock_kind(key)              what the lock's name holds: 'none'; 'lock' (a
                              hash with a TTL, every field a hold count,
                              integer_text and 1 or more: Redisson and
                              dlockd delete a field whose count falls to 0;
                              a lock or fair lock); 'rw' (the
                              same plus a mode field read/write, and no
                              reader's count above READ_HOLDS_MOST);
                              'other' (anything else: the name is not a
                              lock; dlockd and Redisson always
                              set a TTL, so a hash without one is an
                              application's own data); with 'lock' and 'rw',
                              the hash's fields and values (HGETALL) and its
                              pttl too
  counter_ok(key)             key is absent or an integer INCR can add to
                              (one GET: next_token uses what it read)
  type_ok(key, t)             key is absent or of type t
  typed_call(command, ...)    redis.call, but nil when the key is of another
                              type (WRONGTYPE: nothing done): the call is
                              its own type check; any other error (an ACL
                              refusal, READONLY, OOM) is raised as
                              redis.call raises it, so it reaches dlockd as
                              Redis' refusal (503), never as foreign data.
                              Every guard's read goes through it
  owner_ok(owner)             owner is no field of the layout ('mode', a
                              '...:write' writer field); dlockd refuses such
                              owners before they reach a script
  unpack_list(s)              the strings of one argument that holds many,
                              each as <length>:<string>, one after the
                              other ("3:ci-2:abc" is ci-2 then abc); nil
                              when s is malformed
  field_of(fields, name)      the value of field name in fields (a hash's
                              HGETALL, as lock_kind gives it); nil if none
  held_refusal(key, want, owner, owners)
                              the checks a release or renewal of a lock of
                              kind want ('lock' or 'rw') by owner starts
                              with: nil (and key's fields and pttl, as
                              lock_kind gives them) to go on, else the reply to give
                              at once: {0} nobody holds key, {-1} it is the
                              other kind, {-3} it (or its holders' hash
                              owners) is not a lock's, or an error for an
                              owner that is a field of the layout
  acquire_refusal(key, want, owner, counter, k1, t1, k2, t2, ...)
                              the checks an acquire of a lock of kind want
                              ('lock' or 'rw') by owner starts with, each
                              in turn: nil, key's lock_kind ('none' or
                              want), its fields and pttl to go on, else the reply
                              to give at once: an error for an owner that
                              is a field of the layout, {-1} key is the
                              other kind, {-3} key, its fencing counter
                              (counter_ok; nil: not checked) or a key ki of
                              its own (type_ok(ki, ti)) is not a lock's
  The holders' hash (dlockd's own: dlockd_lock_owners:{N}, passed as
  owners) has one field per holding dlockd made, named as that holding's
  field in the lock hash (the owner; '<owner>:write' for a writer); its
  value is '<token>', or '<token> <principal>' when the holding was made
  under an auth token of that name. An entry counts only while the lock
  hash has its field (Redisson, or a purge of expired read holds, may have
  dropped the holding without a word: the entry is then stale, ignored and
  overwritten); the hash lives as long as the lock hash (owners_sync).
  owners_entry(owners, field) the token (a number) and principal ('' for
                              none) of field's entry; nil if it has none
  owners_parse(v)             the same of an entry's value v (nil or false:
                              none), for a script that read them all; a
                              token no Lua number holds exactly is none (a
                              new one is given), its principal still counts
  owners_refused(owners, field, principal)
                              true when the holding of field (which the lock
                              hash has) was made under another token name
                              than principal: it may not be repeated,
                              re-entered, renewed or released. Never with
                              auth off (principal '') or for a holding
                              whose entry has no principal (made with auth
                              off, by Redisson, or by an older dlockd)
  owners_token(owners, field, counter, lease, principal, fresh)
                              the fencing token of field's holding: with
                              fresh (a holding that starts now), or when it
                              has no entry, a new one (next_token) recorded
                              with principal; else the entry's, and the
                              counter lives at least lease more
  owners_value(owners, field, given, value, fresh)
                              keep the holder value of field's holding in
                              field '=<field>' ('=' starts no owner id):
                              given '1' sets it to value; else a fresh
                              holding has none (a repeat keeps its own)
  owners_values(owners, fields)
                              the values of those holdings, in order (false
                              for none)
  owners_new(owners, field, counter, lease, principal, given, value, record,
             sole)
                              a fresh holding's whole entry in one HSET
                              (token, next_token(counter, lease, sole);
                              change number NOW_US with record, the value
                              when given) and owners' lease, when type_ok
                              found owners absent: nothing there to keep,
                              read or purge (the same result as
                              owners_token, owners_value, owners_bump and
                              owners_sync, in 2 commands instead of 7).
                              Returns token, change; nil (nothing written)
                              when owners exists
  owners_ok(owners, kind)     owners is a hash or absent (type_ok), or kind
                              is 'none': a free lock's grant leaves the
                              check to owners_open, its first write
  owners_open(owners, field, g)
                              a fresh holding of a lock that was free
                              (lock_kind 'none'): its whole entry in one
                              HSET, with the token next_token will SET
                              (g as for owners_grant, which must follow and
                              then writes the counter and owners' lease:
                              2 commands more). Called before the script's
                              first write, so that HSET is the type check
                              of owners: false, nothing written, when
                              owners is not a hash (the TYPE it saves is a
                              command of every uncontended acquire). A
                              stale entry of field there (the lock hash
                              went without owners: Redisson's release or
                              force-unlock) is overwritten (HSET's count
                              says so) and its value dropped; stale
                              entries of other fields are ignored, as
                              everywhere, and go with owners. The change
                              number is NOW_US, as when owners expired
                              with the holding (an entry written later
                              than NOW_US would be a clock gone back)
  owners_grant(owners, key, field, g)
                              record a grant to field (a new holding, a
                              repeat or a re-entry) in owners, g saying
                              how: {counter, lease, principal, given,
                              value, record, fresh, sole, pttl}: after
                              owners_open (g.token set), the counter and
                              owners' lease; else a fresh
                              holding's entry with owners_new when it can,
                              else owners_token, owners_value, owners_bump
                              and owners_sync(owners, key, pttl) (with no
                              key, a semaphore's: owners lives at least
                              lease more). Returns token, change
  owners_sync(owners, key, pttl)
                              after the lock hash key was written: drop the
                              entries of fields key no longer has (all of
                              them when key is gone) and give owners key's
                              lease (pttl: key's, when the caller knows it)
  The same hash numbers each holding's changes, for an undo
  (lock_undo.lua, rw_undo.lua) to know whether a holding is still as a
  change left it: field '#<field>' ('#' starts no owner id, no Redisson
  field) of a holding dlockd changed holds '<change>', a number every
  change of the holding replaces by a larger one -- a grant, repeat,
  re-entry, renewal, partial release, the purge of an expired read hold,
  an undo. Each is the previous + 1, raised to Redis' clock in
  microseconds (as next_token), so a holding that ends and starts again
  never meets a number it had. An acquire records after it what its undo
  needs: '<change> <added> <end> <writer> [<end_k>...]' -- added 1 when
  it added a hold; end, the holding's lease end before it (Redis ms; 0:
  there was no holding); writer, for a read holding in a write-locked
  lock, the number of the owner's write holding's change then (0: none);
  end_k, for a read repeat, the end of read hold k before it. An undo
  leaves '<change> u<the change undone>'; a session heartbeat's renewal
  of a grant '<change> h<the grant's record>' (owners_renewed); a repeat
  over a grant keeps the grant's record (below). The entry goes with its
  holding (owners_sync).
  owners_change(owners, field) the number of field's holding's last change
                              (nil: none recorded)
  owners_bump(owners, field, record)
                              number a new change of field's holding, with
                              record (a string, or nil) after the number;
                              returns the number. owners_sync must follow:
                              it gives owners its lease
  owners_renewed(owners, field, holds, floor)
                              number a renewal of field's holding, which
                              has holds holds (owners_bump). A session
                              heartbeat's (floor) renewal of a holding its
                              last change made (a grant that added its
                              only hold) keeps that grant's record after
                              its own number: '<n> h<the grant's record>'.
                              The heartbeat answered no call for the
                              holding, so the grant's undo (a multi-lock's
                              take-back, a grant the replicas did not
                              confirm) still takes it back, renewal and
                              all; the number is new all the same, so an
                              undo of another holding that depends on this
                              one's number (a read's, on its owner's
                              write holding) leaves the renewal alone
  A repeat over a grant (owners_grant) keeps the grant's record after its
  own: '<change> 0 ... |<the grant's record>'. The grant's call may not be
  answered yet, and the repeat's may end without a 200 too (refused,
  unconfirmed): then each undo must still find what it needs.
    - the grant's undo, finding the repeat over it, leaves the holding
      (the repeat's answer may stand) but marks the grant withdrawn
      (withdraw_under: ' w' after it);
    - the repeat's undo then takes the holding back whole when it is the
      grant's only hold (withdrawn_grant); else it puts the grant's record
      back as the last ('<n> h<the grant's record> u<the repeat>',
      owners_undone), so that the grant's undo, coming later, finds it.
  owners_record(owners, field) the record of field's last change, for its
                              undo: returns record (the change's own;
                              within an 'h' record the grant's), undone
                              (the change an undo took back last, or nil),
                              prev (the grant a repeat was made over, or
                              nil), withdrawn (prev's undo came), and the
                              record as a renewal keeps it
  grant_record(r)             is r a grant's record, on its own?
  withdraw_under(owners, field, change, prev, withdrawn)
                              an undo of change found a later change: mark
                              change withdrawn if that is a repeat over it
  withdrawn_grant(prev, withdrawn, holds)
                              does a repeat's undo take the holding (holds
                              holds) back whole, its grant withdrawn?
  owners_undone(owners, field, change, prev, withdrawn)
                              number the undo of change (owners_bump):
                              '<n> u<change>', or, when it put a repeat
                              over a grant back, that grant's record first
  Redis does not undo the writes of a script that fails half way, so every
  script checks with these (and returns, or fails) before its first write,
  and one that publishes decides what to say from reads alone and publishes
  before that write too (the ACL may refuse the channel; a script runs
  whole, so a subscriber acting on the message already sees its writes). ]]
-- Lua's functions and libraries, from the globals of the call running
-- now: call_begin takes them into these locals once. A library of
-- functions reaches its globals through the metatable Redis guards them
-- with, a lookup dearer than a local's; at load time they are not there.
local function lua_globals()
  return string, math, table, tonumber, tostring, type, ipairs, pairs, unpack, error, pcall,
    select, next
end
local string, math, table, tonumber, tostring, type, ipairs, pairs, unpack, error, pcall,
  select, next

-- Redis' own redis of the call running now (in a library of functions
-- the global redis of a call is not the one it was loaded with), before
-- this library's redis below hides it: call_begin takes its call and
-- pcall from it, error_reply and register_function take it when wanted
local function redis_of_call()
  return redis
end

local function error_reply(msg)
  return redis_of_call().error_reply(msg)
end

local function register_function(...)
  return redis_of_call().register_function(...)
end

-- What one call knows, set by call_begin before anything else runs. A
-- script is also one of a library of functions (lua/gen-scripts.sh): then
-- these locals outlive the call, and call_begin starts each call afresh.
-- Redis' clock, read once, when first wanted: a script runs whole, so one
-- reading serves the deadline check, the tokens and the change numbers
local NOW_US
-- the call's deadline (ms, Redis' clock), and whether it was checked
local DEADLINE_MS
local CHECKED
local PUBLISH
-- Redis' own call and pcall, taken by call_begin
local redis_call, redis_pcall
-- counter_ok's reading of each counter it checked: its value, or false
-- when it was absent
local counter_seen
-- type_ok's reading of each key it checked: its type
local type_seen

-- The commands the scripts read with: only these run before the deadline
-- check (a command missing here is checked for, never let through).
-- tests/integration/test_scripts_late.c holds each to Redis' readonly flag.
local READS = {
  exists = true, get = true, hexists = true, hget = true, hgetall = true, hkeys = true,
  hlen = true, hmget = true, lindex = true, llen = true, lrange = true, pttl = true,
  scard = true, sismember = true, smembers = true, type = true, zcard = true,
  zcount = true, zmscore = true, zrange = true, zrangebyscore = true, zscore = true,
}

local function now_us()
  if not NOW_US then
    local t = redis_call('time')
    -- digits (TIME's): the arithmetic reads them once, tonumber twice
    NOW_US = t[1] * 1000000 + t[2]
  end
  return NOW_US
end

local function now_ms()
  return math.floor(now_us() / 1000)
end

-- Before the first command that may change something (the callers ask
-- CHECKED and READS first): a call past its deadline stops here, having
-- changed nothing.
local function deadline_check()
  if now_ms() > DEADLINE_MS then
    error(error_reply('DLOCKD_LATE the call reached redis after its deadline'))
  end
  CHECKED = true
end

local redis = {
  call = function(cmd, ...)
    if not CHECKED and not READS[cmd] then
      deadline_check()
    end
    return redis_call(cmd, ...)
  end,
  pcall = function(cmd, ...)
    if not CHECKED and not READS[cmd] then
      deadline_check()
    end
    return redis_pcall(cmd, ...)
  end,
  error_reply = error_reply,
  register_function = register_function,
}

-- Every call's start (the generated code calls it before the script's
-- own first line): nil to go on, else the error to return at once.
local function call_begin(argv)
  if not tonumber then
    string, math, table, tonumber, tostring, type, ipairs, pairs, unpack, error, pcall, select,
      next = lua_globals()
  end
  local r = redis_of_call()
  redis_call, redis_pcall = r.call, r.pcall
  NOW_US, CHECKED = nil, false
  counter_seen, type_seen = {}, {}
  -- whole milliseconds, as dlockd sends them: never nan, inf or 1e400,
  -- which no clock would pass
  local deadline = argv[#argv] or ''
  DEADLINE_MS = #deadline <= 16 and string.match(deadline, '^%d+$') and deadline + 0
  if not DEADLINE_MS then
    return error_reply('ERR dlockd script called without its deadline')
  end
  PUBLISH = argv[#argv - 1]
  if PUBLISH ~= 'publish' and PUBLISH ~= 'spublish' then
    return error_reply('ERR dlockd script called without its publish command')
  end
end

-- n ms as a command's argument: Redis would write a number with %.17g
-- (glibc's floating-point printing), dearer than an integer's %d
local function ms(n)
  return string.format('%d', n)
end

local function tell_lease(channel, lease)
  redis.call(PUBLISH, channel, string.format('-%d', lease))
end

local function bounded_lease(lease, ends)
  lease, ends = tonumber(lease), tonumber(ends)
  if ends and ends > 0 and ends - now_ms() < lease then
    lease = math.max(ends - now_ms(), 1)
  end
  return lease
end

local function lease_at_least(key, lease, pttl)
  pttl = pttl or redis.call('pttl', key)
  if pttl < lease then
    redis.call('pexpire', key, ms(lease))
    pttl = lease
  end
  return pttl
end

-- next_token in two halves: the token (a read at most), then its SET
local function token_next(key)
  -- counter_ok(key) was checked before the script's first write, and
  -- read the counter: the next token is one more, or Redis' clock
  local seen = counter_seen[key]
  if seen == nil then
    seen = tonumber(redis.call('get', key) or '') or false
    counter_seen[key] = seen
  end
  local token = (seen or 0) + 1
  if token < now_us() then
    token = now_us()
  end
  return token
end

local function token_store(key, token, lease, sole)
  local life = lease
  if counter_seen[key] and not sole then
    life = math.max(life, redis.call('pttl', key))
  end
  redis.call('set', key, string.format('%d', token), 'px', ms(life))
  counter_seen[key] = token
end

local function next_token(key, lease, sole)
  local token = token_next(key)
  token_store(key, token, lease, sole)
  return token
end

local function typed_call(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    if string.find(r.err, '^WRONGTYPE') then
      return nil
    end
    error(r)	-- as redis.call would: Redis' own refusal (READONLY, OOM, ...)
  end
  return r
end

local function integer_text(v)
  if v == '0' then
    return true
  elseif #v > 17 or not string.find(v, '^%-?[1-9]%d*$') then
    return false
  end
  local n = v + 0	-- rounded, if at all, away from 0: never under 2^53
  return n < 9007199254740992 and n > -9007199254740992
end

-- The most read holds one owner of a read-write lock may have (the bound
-- of --max-read-holds-per-owner, service/config/config.c): a call reads
-- each one's key, so a count above it is no lock's (Redisson's or
-- dlockd's), only a name's that would hold Redis up
local READ_HOLDS_MOST = 100000

local function lock_kind(key)
  local pttl = redis.call('pttl', key)
  if pttl == -2 then
    return 'none'
  elseif pttl == -1 then
    return 'other'
  end
  local mode
  local f = typed_call('hgetall', key)
  if not f then
    return 'other'	-- not a hash
  end
  for i = 1, #f, 2 do
    if f[i] == 'mode' then
      mode = f[i + 1]
    elseif not integer_text(f[i + 1]) or f[i + 1] == '0' or
           string.byte(f[i + 1]) == 45 then	-- '-': no hold is 0 or fewer
      return 'other'
    end
  end
  if not mode then
    return 'lock', f, pttl
  elseif mode ~= 'read' and mode ~= 'write' then
    return 'other'
  end
  for i = 1, #f, 2 do
    if f[i] ~= 'mode' and string.sub(f[i], -6) ~= ':write' and
       f[i + 1] + 0 > READ_HOLDS_MOST then
      return 'other'	-- a reader's count no read-write lock has
    end
  end
  return 'rw', f, pttl
end

local function counter_ok(key)
  local v = typed_call('get', key)
  if v == nil then
    return false	-- not a string
  elseif not v then
    counter_seen[key] = false
    return true
  elseif not integer_text(v) then
    return false
  end
  counter_seen[key] = v + 0	-- integer_text: digits
  return true
end

local function type_ok(key, t)
  local got = redis.call('type', key).ok
  type_seen[key] = got
  return got == 'none' or got == t
end

local function owner_ok(owner)
  return owner ~= 'mode' and string.sub(owner, -6) ~= ':write'
end

local function unpack_list(s)
  local v, pos = {}, 1
  while pos <= #s do
    local colon = string.find(s, ':', pos, true)
    local len = colon and tonumber(string.sub(s, pos, colon - 1))
    if not len or colon + len > #s then
      return nil
    end
    v[#v + 1] = string.sub(s, colon + 1, colon + len)
    pos = colon + len + 1
  end
  return v
end

local function field_of(fields, name)
  for i = 1, #fields, 2 do
    if fields[i] == name then
      return fields[i + 1]
    end
  end
  return nil
end

local function held_refusal(key, want, owner, owners)
  if not owner_ok(owner) then
    return redis.error_reply('DLOCKD_OWNER owner is a field of the layout')
  end
  local kind, fields, pttl = lock_kind(key)
  if kind == 'none' then
    return {0}
  elseif kind == 'other' then
    return {-3}
  elseif kind ~= want then
    return {-1}
  elseif not type_ok(owners, 'hash') then
    return {-3}
  end
  return nil, fields, pttl
end

local function acquire_refusal(key, want, owner, counter, ...)
  if not owner_ok(owner) then
    return redis.error_reply('DLOCKD_OWNER owner is a field of the layout')
  end
  local kind, fields, pttl = lock_kind(key)
  if kind ~= 'none' and kind ~= 'other' and kind ~= want then
    return {-1}
  elseif kind == 'other' or (counter and not counter_ok(counter)) then
    return {-3}
  end
  local typed = {...}
  for i = 1, #typed, 2 do
    if not type_ok(typed[i], typed[i + 1]) then
      return {-3}
    end
  end
  return nil, kind, fields, pttl
end

local function owners_parse(v)
  local token, principal = string.match(v or '', '^(%d+) ?([^ ]*)$')
  if not token then
    return nil
  elseif not integer_text(token) then
    return nil, principal	-- a token dlockd never gave: none, but its principal
  end
  return token + 0, principal
end

local function owners_entry(owners, field)
  return owners_parse(redis.call('hget', owners, field))
end

local function owners_refused(owners, field, principal)
  if principal == '' then
    return false
  end
  local _, p = owners_entry(owners, field)
  return p ~= nil and p ~= '' and p ~= principal
end

local function owners_token(owners, field, counter, lease, principal, fresh)
  local token = not fresh and owners_entry(owners, field)
  if token then
    lease_at_least(counter, lease)
    return token
  end
  token = next_token(counter, lease)
  if principal == '' then
    redis.call('hset', owners, field, string.format('%d', token))
  else
    redis.call('hset', owners, field, string.format('%d %s', token, principal))
  end
  return token
end

local function owners_change(owners, field)
  return tonumber(string.match(redis.call('hget', owners, '#' .. field) or '', '^%d+'))
end

local function owners_bump(owners, field, record)
  local n = now_us()
  local last = owners_change(owners, field)
  if last and last >= n then
    n = last + 1
  end
  local v = string.format('%d', n)
  if record then
    v = v .. ' ' .. record
  end
  redis.call('hset', owners, '#' .. field, v)
  return n
end

local function owners_record(owners, field)
  local raw = redis.call('hget', owners, '#' .. field) or ''
  local inner = string.match(raw, '^%d+ h(.*)$') or raw
  local own, undone = string.match(inner, '^(.-) u(%d+)$')
  own = own or inner
  local mine, prev = string.match(own, '^(.-) |(.*)$')
  local withdrawn = false
  if prev and string.sub(prev, -2) == ' w' then
    prev, withdrawn = string.sub(prev, 1, -3), true
  end
  return mine or own, undone, prev, withdrawn, inner
end

-- a grant's record: '<change> 1 ...', nothing after its own fields
local function grant_record(r)
  return r and string.match(r, '^%d+ 1 [%d ]*$')
end

local function owners_renewed(owners, field, holds, floor)
  if floor and holds == 1 then
    local own, _, prev, _, inner = owners_record(owners, field)
    if not prev and grant_record(own) then
      owners_bump(owners, field, 'h' .. inner)
      return
    end
  end
  owners_bump(owners, field)
end

local function withdraw_under(owners, field, change, prev, withdrawn)
  if prev and not withdrawn and string.match(prev, '^%d+') == change then
    redis.call('hset', owners, '#' .. field, redis.call('hget', owners, '#' .. field) .. ' w')
  end
end

local function withdrawn_grant(prev, withdrawn, holds)
  return withdrawn and holds == 1 and string.match(prev, '^%d+ 1 ') ~= nil
end

local function owners_undone(owners, field, change, prev, withdrawn)
  if prev and not withdrawn then
    owners_bump(owners, field, 'h' .. prev .. ' u' .. change)
  else
    owners_bump(owners, field, 'u' .. change)
  end
end

local function owners_value(owners, field, given, value, fresh)
  if given == '1' then
    redis.call('hset', owners, '=' .. field, value)
  elseif fresh then
    redis.call('hdel', owners, '=' .. field)
  end
end

local function owners_values(owners, fields)
  local v = {}
  for i, f in ipairs(fields) do
    v[i] = redis.call('hget', owners, '=' .. f)
  end
  return v
end

-- the HSET arguments of a fresh holding's whole entry in owners
local function owners_fresh_entry(owners, field, token, principal, given, value, record)
  local entry = string.format('%d', token)
  if principal ~= '' then
    entry = entry .. ' ' .. principal
  end
  local args = {owners, field, entry, '#' .. field, string.format('%d %s', now_us(), record)}
  if given == '1' then
    args[#args + 1] = '=' .. field
    args[#args + 1] = value
  end
  return args
end

local function owners_new(owners, field, counter, lease, principal, given, value, record,
                          sole)
  if type_seen[owners] ~= 'none' then
    return nil
  end
  local token = next_token(counter, lease, sole)
  redis.call('hset', unpack(owners_fresh_entry(owners, field, token, principal, given, value,
                                               record)))
  redis.call('pexpire', owners, ms(lease))
  return token, now_us()
end

local function owners_ok(owners, kind)
  return kind == 'none' or type_ok(owners, 'hash')
end

local function owners_open(owners, field, g)
  local token = token_next(g.counter)
  local args = owners_fresh_entry(owners, field, token, g.principal, g.given, g.value, g.record)
  -- the script's first write, so the type check: WRONGTYPE writes nothing
  local added = typed_call('hset', unpack(args))
  if not added then
    return false
  elseif added < (#args - 1) / 2 and g.given ~= '1' then
    -- a stale entry of field was there: its value is not this holding's
    redis.call('hdel', owners, '=' .. field)
  end
  g.token = token
  return true
end

local function owners_sync(owners, key, pttl)
  pttl = pttl or redis.call('pttl', key)
  if pttl == -2 then
    redis.call('del', owners)
    return
  end
  local fields = redis.call('hkeys', owners)
  local left = #fields
  if left == 0 then
    return
  end
  -- which holdings key still has, asked in one HMGET
  local helds, at = {}, {}
  for i, f in ipairs(fields) do
    local held = f
    if string.sub(f, 1, 1) == '#' or string.sub(f, 1, 1) == '=' then
      held = string.sub(f, 2)	-- its change number and value go with it
    end
    if not at[held] then
      helds[#helds + 1] = held
      at[held] = #helds
    end
    fields[i] = {f, held}
  end
  local have = redis.call('hmget', key, unpack(helds))
  for _, fh in ipairs(fields) do
    if not have[at[fh[2]]] then
      redis.call('hdel', owners, fh[1])
      left = left - 1
    end
  end
  if left > 0 and pttl > 0 then
    redis.call('pexpire', owners, ms(pttl))
  end
end

local function owners_grant(owners, key, field, g)
  local token, change
  if g.token then
    -- owners_open wrote the entry: the counter and owners' lease are left
    token_store(g.counter, g.token, g.lease, g.sole)
    redis.call('pexpire', owners, ms(g.lease))
    return g.token, now_us()
  elseif g.fresh then
    token, change = owners_new(owners, field, g.counter, g.lease, g.principal, g.given, g.value,
                               g.record, g.sole)
  end
  if token then
    return token, change
  end
  token = owners_token(owners, field, g.counter, g.lease, g.principal, g.fresh)
  owners_value(owners, field, g.given, g.value, g.fresh)
  local record = g.record
  if string.sub(record, 1, 2) == '0 ' then
    -- a repeat over a grant whose call may not have been answered yet:
    -- that grant's record goes with it, for its undo (owners_record)
    local last = owners_record(owners, field)
    if grant_record(last) then
      record = record .. ' |' .. last
    end
  end
  change = owners_bump(owners, field, record)
  if key then
    owners_sync(owners, key, g.pttl)
  else
    lease_at_least(owners, g.lease)
  end
  return token, change
end
