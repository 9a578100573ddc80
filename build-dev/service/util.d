build-dev/service/util.o: service/util.c service/util.h
service/util.h:
