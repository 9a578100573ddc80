build-dev/tests/integration/test_bad_input.o: \
 tests/integration/test_bad_input.c \
 tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
