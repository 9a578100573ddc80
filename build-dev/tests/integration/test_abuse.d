build-dev/tests/integration/test_abuse.o: tests/integration/test_abuse.c \
 tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
