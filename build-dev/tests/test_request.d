build-dev/tests/test_request: tests/unit/test_request.c tests/unit/unit.h \
 tests/unit/../../api/request.c tests/unit/../../api/request.h \
 tests/unit/../../api/../service/config.h \
 tests/unit/../../api/../service/locks.h tests/unit/../../api/routes.h \
 tests/unit/../../api/reply.h
tests/unit/unit.h:
tests/unit/../../api/request.c:
tests/unit/../../api/request.h:
tests/unit/../../api/../service/config.h:
tests/unit/../../api/../service/locks.h:
tests/unit/../../api/routes.h:
tests/unit/../../api/reply.h:
