build-dev/tests/integration/test_process.o: \
 tests/integration/test_process.c tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
