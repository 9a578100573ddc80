build-dev/api/handle_locks.o: api/handle_locks.c api/handlers.h \
 api/request.h api/../service/config.h api/../service/locks.h \
 api/routes.h api/reply.h api/server.h api/../service/log.h \
 api/../service/metrics.h api/../service/locks.h api/../service/util.h \
 api/../service/waiters.h
api/handlers.h:
api/request.h:
api/../service/config.h:
api/../service/locks.h:
api/routes.h:
api/reply.h:
api/server.h:
api/../service/log.h:
api/../service/metrics.h:
api/../service/locks.h:
api/../service/util.h:
api/../service/waiters.h:
