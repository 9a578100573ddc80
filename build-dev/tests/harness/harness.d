build-dev/tests/harness/harness.o: tests/harness/harness.c \
 tests/harness/harness.h
tests/harness/harness.h:
