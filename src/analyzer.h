/* SPDX-License-Identifier: MIT */
/* analyzer.h - DS-Analyzer: the types and functions other modules use (see analyzer.c). */
#ifndef CDL_ANALYZER_H
#define CDL_ANALYZER_H
#include "platform.h"

/* ---- interface ---- */
CDL_PRIVATE coordl_status cdl__analyze(const coordl_config *cfg, coordl_step_fn step_fn, void *user, const coordl_analyze_opts *opts_in, coordl_report *r);
CDL_PRIVATE uint32_t cdl__ra_threads_for(uint32_t depth);
CDL_PRIVATE void cdl__report_free(coordl_report *r);
CDL_PRIVATE void cdl__analyze_opts_default(coordl_analyze_opts *o);
CDL_PRIVATE size_t cdl__report_svg(const coordl_report *r, const coordl_measured *m, size_t nm, char *buf, size_t cap);
CDL_PRIVATE size_t cdl__report_json(const coordl_report *r, char *buf, size_t cap);
CDL_PRIVATE coordl_whatif cdl__report_predict(const coordl_report *r, double f, int threads, double storage_mb_per_s);
CDL_PRIVATE coordl_whatif cdl__report_predict_ra(const coordl_report *r, double f, int threads, double storage_mb_per_s, uint32_t depth, uint32_t io_threads);
#endif /* CDL_ANALYZER_H */
