--[[ lock_renew.lua -- heartbeat: set the lease of a lock the owner holds.
  libs: common renew_lock
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] holders dlockd_lock_owners:{N}
  KEYS[3] channel redisson_lock__channel:{N} (a fair lock's: the prefix of
          its waiters' own channels)
  KEYS[4] (fair locks only) queue redisson_lock_queue:{N}
  ARGV[1] lease ms                    ARGV[2] owner field
  ARGV[3] the caller's token name ("": auth off)
  ARGV[4] the lease never runs past this (Redis' clock, ms: a session's
          end, for a session's grant set to its session's lease); "0": no
          bound
  Returns {1, lease}  renewed: N now expires in lease ms
          {0}         nobody holds N (the lease already ran out)
          {-2}        another owner holds N
          {-2, 7, 0}  the owner holds N under another token name
          {-1}        N is a read-write lock
          {-3}        N (or its holders' hash) holds something that is not a
                      lock's
  Never re-creates a lock: only an existing owner field is renewed.
  A lease made shorter publishes "0" on KEYS[3]: waiters (of every dlockd
  instance) time their retry from the lease they saw, and expiry publishes
  nothing, so without it they would sleep past the new, earlier end. A
  Redisson waiter takes the message as "try now", finds the lock held and
  waits again with the new lease: harmless. A fair lock's is told to the
  queue head alone, "-<lease>" on its own channel (only the head watches
  the holder's lease; a Redisson head ignores it), or with nobody queued
  "0" on the prefix KEYS[3], where /locks waiters on the name listen. ]]
return renew_lock(KEYS[1], KEYS[2], KEYS[3], bounded_lease(ARGV[1], ARGV[4]), ARGV[2], ARGV[3],
                  KEYS[4])
