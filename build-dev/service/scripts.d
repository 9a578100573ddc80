build-dev/service/scripts.o: service/scripts.c service/scripts.h \
 service/redis_conn.h service/util.h
service/scripts.h:
service/redis_conn.h:
service/util.h:
