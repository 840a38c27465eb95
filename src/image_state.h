/* SPDX-License-Identifier: MIT */
/* image_state.h - decode limits and stb_image: the types image.c owns (its state, and the data it
 * shares with other modules). handle.h composes the states; image.h declares
 * the functions. */
#ifndef CDL_IMAGE_STATE_H
#define CDL_IMAGE_STATE_H
#include "platform.h"

#define CDL_JPEG_MAX_SCANS 500 /* progressive files have ~10; libjpeg-turbo's fuzzers stop at 500 */

#endif /* CDL_IMAGE_STATE_H */
