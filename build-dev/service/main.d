build-dev/service/main.o: service/main.c service/auth.h service/config.h \
 service/locks.h service/log.h service/pubsub.h service/redis_conn.h \
 service/scripts.h service/util.h service/waiters.h \
 service/../api/server.h service/../api/../service/config.h
service/auth.h:
service/config.h:
service/locks.h:
service/log.h:
service/pubsub.h:
service/redis_conn.h:
service/scripts.h:
service/util.h:
service/waiters.h:
service/../api/server.h:
service/../api/../service/config.h:
