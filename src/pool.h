#ifndef CDL_POOL_H
#define CDL_POOL_H
#include "platform.h"
#include "worker.h"
#include "stream.h"


/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__pool_start(coordl *L);
CDL_PRIVATE void cdl__pool_stop(coordl *L);
CDL_PRIVATE void cdl__worker_prepare(cdl__worker *W, const cdl__claim *c, cdl__row_result *r);
#endif /* CDL_POOL_H */
