build-dev/tests/test_config: tests/unit/test_config.c tests/unit/unit.h \
 tests/unit/../../service/config.c tests/unit/../../service/config.h \
 tests/unit/../../service/log.h tests/unit/../../service/redis_conn.h \
 tests/unit/../../service/util.h
tests/unit/unit.h:
tests/unit/../../service/config.c:
tests/unit/../../service/config.h:
tests/unit/../../service/log.h:
tests/unit/../../service/redis_conn.h:
tests/unit/../../service/util.h:
