build-dev/tests/test_waiters: tests/unit/test_waiters.c tests/unit/unit.h \
 tests/unit/../../service/waiters.c tests/unit/../../service/waiters.h \
 tests/unit/../../service/heap.h tests/unit/../../service/util.h
tests/unit/unit.h:
tests/unit/../../service/waiters.c:
tests/unit/../../service/waiters.h:
tests/unit/../../service/heap.h:
tests/unit/../../service/util.h:
