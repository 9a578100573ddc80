build-dev/tests/integration/test_locks.o: tests/integration/test_locks.c \
 tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
