/* unit.h -- what every cmocka unit test includes first. */
#ifndef DLOCKD_UNIT_H
#define DLOCKD_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#endif
