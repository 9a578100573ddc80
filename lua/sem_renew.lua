--[[ sem_renew.lua -- heartbeat: set the lease of the caller's permit.
  libs: common sem renew_sem
  flags: allow-oom
  KEYS[1] count N                     KEYS[2] permits {N}:timeout
  KEYS[3] channel redisson_sc:{N}     KEYS[4] holders dlockd_lock_owners:{N}
  ARGV[1] lease ms                    ARGV[2] owner
  ARGV[3] the caller's token name ("": auth off)
  ARGV[4] the lease never runs past this (Redis' clock, ms: a session's
          end, for a session's grant set to its session's lease); "0": no
          bound
  Returns {1, lease}  renewed: the permit now ends in lease ms
          {0}         the owner holds no permit (its lease ran out)
          {-2, 7, 0}  the owner holds it under another token name
          {-1}        N is a lock
          {-3}        a key holds something that is not a semaphore's
  Never re-creates a permit. A lease made shorter publishes "0": waiters
  timed their retry by the earliest lease end they saw, and expiry
  publishes nothing (a Redisson waiter takes it as "try now"). ]]
return renew_sem(KEYS[1], KEYS[2], KEYS[3], KEYS[4], bounded_lease(ARGV[1], ARGV[4]), ARGV[2],
                 ARGV[3])
