build-dev/tests/integration/test_metrics.o: \
 tests/integration/test_metrics.c tests/integration/../harness/harness.h
tests/integration/../harness/harness.h:
