build-dev/tests/integration/test_install.o: \
 tests/integration/test_install.c tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
