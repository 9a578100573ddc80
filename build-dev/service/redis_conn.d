build-dev/service/redis_conn.o: service/redis_conn.c service/redis_conn.h \
 service/log.h service/util.h
service/redis_conn.h:
service/log.h:
service/util.h:
