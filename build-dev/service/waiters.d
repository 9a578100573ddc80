build-dev/service/waiters.o: service/waiters.c service/waiters.h \
 service/heap.h service/util.h
service/waiters.h:
service/heap.h:
service/util.h:
