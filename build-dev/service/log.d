build-dev/service/log.o: service/log.c service/log.h
service/log.h:
