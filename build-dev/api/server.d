build-dev/api/server.o: api/server.c api/server.h api/../service/config.h \
 api/conn_guard.h api/handlers.h api/request.h api/../service/locks.h \
 api/routes.h api/reply.h api/../service/auth.h api/../service/log.h \
 api/../service/metrics.h api/../service/locks.h api/../service/util.h \
 api/../service/redis_conn.h
api/server.h:
api/../service/config.h:
api/conn_guard.h:
api/handlers.h:
api/request.h:
api/../service/locks.h:
api/routes.h:
api/reply.h:
api/../service/auth.h:
api/../service/log.h:
api/../service/metrics.h:
api/../service/locks.h:
api/../service/util.h:
api/../service/redis_conn.h:
