/* SPDX-License-Identifier: MIT */
/* io_state.h - the storage seam (coordl_io): the types io.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; io.h declares
 * the functions. */
#ifndef CDL_IO_STATE_H
#define CDL_IO_STATE_H
#include "platform.h"

/* One line of a list file (cdl__list_next): not NUL-terminated. */
typedef struct cdl__list_line {
    const char *text;
    size_t len;
    uint64_t lineno; /* 1-based, counting empty lines too */
} cdl__list_line;

#endif /* CDL_IO_STATE_H */
