build-dev/tests/integration/test_auth.o: tests/integration/test_auth.c \
 tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
