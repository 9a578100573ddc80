build-dev/tests/test_locks: tests/unit/test_locks.c tests/unit/unit.h \
 tests/unit/../../service/locks.c tests/unit/../../service/locks.h \
 tests/unit/../../service/log.h tests/unit/../../service/scripts.h \
 tests/unit/../../service/redis_conn.h tests/unit/../../service/util.h
tests/unit/unit.h:
tests/unit/../../service/locks.c:
tests/unit/../../service/locks.h:
tests/unit/../../service/log.h:
tests/unit/../../service/scripts.h:
tests/unit/../../service/redis_conn.h:
tests/unit/../../service/util.h:
