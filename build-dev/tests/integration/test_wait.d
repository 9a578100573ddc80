build-dev/tests/integration/test_wait.o: tests/integration/test_wait.c \
 tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
