build-dev/tests/integration/test_fair.o: tests/integration/test_fair.c \
 tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
