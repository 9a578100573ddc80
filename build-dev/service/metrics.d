build-dev/service/metrics.o: service/metrics.c service/metrics.h \
 service/locks.h service/util.h
service/metrics.h:
service/locks.h:
service/util.h:
