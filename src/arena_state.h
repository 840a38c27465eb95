/* SPDX-License-Identifier: MIT */
/* arena_state.h - arenas: offset-addressed mmap regions: the types arena.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; arena.h declares
 * the functions. */
#ifndef CDL_ARENA_STATE_H
#define CDL_ARENA_STATE_H
#include "platform.h"

typedef struct cdl__arena {
    cdl__u8 *base;
    size_t bytes;  /* mapped length */
    int locked;    /* mlock succeeded */
    int pin_registered;
    int borrowed;  /* part of a group's shm mapping: not unmapped alone */
} cdl__arena;

#endif /* CDL_ARENA_STATE_H */
