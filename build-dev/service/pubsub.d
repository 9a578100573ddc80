build-dev/service/pubsub.o: service/pubsub.c service/pubsub.h \
 service/log.h service/metrics.h service/locks.h service/redis_conn.h \
 service/util.h service/waiters.h
service/pubsub.h:
service/log.h:
service/metrics.h:
service/locks.h:
service/redis_conn.h:
service/util.h:
service/waiters.h:
