build-dev/service/heap.o: service/heap.c service/heap.h service/util.h
service/heap.h:
service/util.h:
