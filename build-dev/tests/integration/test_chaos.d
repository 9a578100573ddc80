build-dev/tests/integration/test_chaos.o: tests/integration/test_chaos.c \
 tests/integration/../harness/checker.h \
 tests/integration/../harness/harness.h
tests/integration/../harness/checker.h:
tests/integration/../harness/harness.h:
