build-dev/tests/harness/checker.o: tests/harness/checker.c \
 tests/harness/checker.h tests/harness/harness.h
tests/harness/checker.h:
tests/harness/harness.h:
