build-dev/tests/integration/test_stress.o: \
 tests/integration/test_stress.c tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
