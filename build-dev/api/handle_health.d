build-dev/api/handle_health.o: api/handle_health.c api/handlers.h \
 api/request.h api/../service/config.h api/../service/locks.h \
 api/routes.h api/reply.h api/server.h api/../service/metrics.h \
 api/../service/locks.h api/../service/pubsub.h \
 api/../service/redis_conn.h api/../service/util.h \
 api/../service/waiters.h
api/handlers.h:
api/request.h:
api/../service/config.h:
api/../service/locks.h:
api/routes.h:
api/reply.h:
api/server.h:
api/../service/metrics.h:
api/../service/locks.h:
api/../service/pubsub.h:
api/../service/redis_conn.h:
api/../service/util.h:
api/../service/waiters.h:
