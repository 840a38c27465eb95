#ifndef CDL_CONFIG_H
#define CDL_CONFIG_H
#include "platform.h"

#define CDL_DEFAULT_MAX_DECODE_BYTES (256ull << 20)
#define CDL_DEFAULT_MAX_AUDIO_SAMPLES (1ull << 26)

/* ---- interface ---- */
CDL_PRIVATE void cdl__row_shape(const coordl *L, uint32_t out_w, uint32_t out_h, uint32_t *c, uint32_t *h, uint32_t *w);
CDL_PRIVATE size_t cdl__image_row_bytes(const coordl *L, uint64_t w, uint64_t h);
CDL_PRIVATE void cdl__output_setup(coordl *L);
CDL_PRIVATE coordl_status cdl__validate(const coordl_config *c);
CDL_PRIVATE coordl_config cdl__config_default(void);
#endif /* CDL_CONFIG_H */
