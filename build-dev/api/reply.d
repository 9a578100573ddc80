build-dev/api/reply.o: api/reply.c api/reply.h api/request.h \
 api/../service/config.h api/../service/locks.h api/routes.h \
 api/../service/log.h api/../service/metrics.h api/../service/locks.h \
 api/../service/util.h
api/reply.h:
api/request.h:
api/../service/config.h:
api/../service/locks.h:
api/routes.h:
api/../service/log.h:
api/../service/metrics.h:
api/../service/locks.h:
api/../service/util.h:
