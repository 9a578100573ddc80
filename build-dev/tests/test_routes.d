build-dev/tests/test_routes: tests/unit/test_routes.c tests/unit/unit.h \
 tests/unit/../../api/routes.c tests/unit/../../api/routes.h \
 tests/unit/../../api/../service/locks.h
tests/unit/unit.h:
tests/unit/../../api/routes.c:
tests/unit/../../api/routes.h:
tests/unit/../../api/../service/locks.h:
