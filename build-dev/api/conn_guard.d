build-dev/api/conn_guard.o: api/conn_guard.c api/conn_guard.h \
 api/../service/log.h api/../service/util.h
api/conn_guard.h:
api/../service/log.h:
api/../service/util.h:
