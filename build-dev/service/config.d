build-dev/service/config.o: service/config.c service/config.h \
 service/log.h service/redis_conn.h service/util.h
service/config.h:
service/log.h:
service/redis_conn.h:
service/util.h:
