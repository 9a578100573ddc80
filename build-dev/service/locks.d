build-dev/service/locks.o: service/locks.c service/locks.h service/log.h \
 service/scripts.h service/redis_conn.h service/util.h
service/locks.h:
service/log.h:
service/scripts.h:
service/redis_conn.h:
service/util.h:
