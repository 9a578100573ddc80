--[[ rw_write_renew.lua -- heartbeat of the writer.
  libs: common rw renew_rw
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] timeout key prefix {N}
  KEYS[3] holders dlockd_lock_owners:{N}
  ARGV[1] lease ms                    ARGV[2] owner field
  ARGV[3] the caller's token name ("": auth off)
  ARGV[4] the lease never runs past this (Redis' clock, ms: a session's
          end, for a session's grant set to its session's lease); "0": no
          bound
  Returns {1, pttl}   renewed: N, and so the write holding, expires in pttl
                      ms: the lease, or longer if the owner's own read
                      holds last longer (a heartbeat cannot end the write
                      holding before them)
          {0}         nobody holds N
          {-2, why, n} the owner does not hold the write lock (why and n as
                      in rw_write_release.lua; why 7: the owner writes N
                      under another token name)
          {-1}        N is a lock or fair lock
          {-3}        N (or its holders' hash) holds something that is not a
                      lock's ]]
return renew_write(KEYS[1], KEYS[2], KEYS[3], bounded_lease(ARGV[1], ARGV[4]), ARGV[2], ARGV[3])
