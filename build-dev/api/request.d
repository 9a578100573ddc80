build-dev/api/request.o: api/request.c api/request.h \
 api/../service/config.h api/../service/locks.h api/routes.h api/reply.h
api/request.h:
api/../service/config.h:
api/../service/locks.h:
api/routes.h:
api/reply.h:
