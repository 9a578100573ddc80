build-dev/tests/integration/test_rwlock.o: \
 tests/integration/test_rwlock.c tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
