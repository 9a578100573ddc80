build-dev/api/routes.o: api/routes.c api/routes.h api/../service/locks.h
api/routes.h:
api/../service/locks.h:
