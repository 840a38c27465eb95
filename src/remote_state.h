/* SPDX-License-Identifier: MIT */
/* remote_state.h - http(s):// and s3:// reads: remote.c keeps its state in
 * the event loop (http_state.h: the loop, its counters, the completion
 * functions of asynchronous reads); remote.h declares the functions. */
#ifndef CDL_REMOTE_STATE_H
#define CDL_REMOTE_STATE_H
#include "platform.h"
#include "http_state.h"

/* the loop, its counters and completion functions are http.c's */
#endif /* CDL_REMOTE_STATE_H */
