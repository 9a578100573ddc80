--[[ rw_read_renew.lua -- heartbeat of a reader: renew every read hold it has.
  libs: common rw renew_rw
  flags: allow-oom
  KEYS[1] lock hash N                 KEYS[2] timeout key prefix {N}
  KEYS[3] holders dlockd_lock_owners:{N}
  ARGV[1] lease ms                    ARGV[2] owner field
  ARGV[3] the caller's token name ("": auth off)
  ARGV[4] the lease never runs past this (Redis' clock, ms: a session's
          end, for a session's grant set to its session's lease); "0": no
          bound
  Returns {1, lease}  renewed: each of the owner's holds lasts lease ms; a
                      read-mode N as long as its longest hold, a
                      write-mode N at least lease ms
          {0}         the owner holds no read lock on N (never took it,
                      released it, or its lease ran out)
          {-2}        another owner holds the write lock
          {-2, 7, 0}  the owner reads N under another token name
          {-1}        N is a lock or fair lock
          {-3}        N (or its holders' hash) holds something that is not a
                      lock's
  Expired read holds are dropped first: a lease that ran out is not renewed. ]]
return renew_read(KEYS[1], KEYS[2], KEYS[3], bounded_lease(ARGV[1], ARGV[4]), ARGV[2], ARGV[3])
