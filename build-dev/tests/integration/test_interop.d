build-dev/tests/integration/test_interop.o: \
 tests/integration/test_interop.c tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
