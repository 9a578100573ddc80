build-dev/service/auth.o: service/auth.c service/auth.h service/log.h \
 service/util.h
service/auth.h:
service/log.h:
service/util.h:
