build-dev/tests/integration/test_redis.o: tests/integration/test_redis.c \
 tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
