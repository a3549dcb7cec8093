/* The fixes in the reports: JSON keys, the text section, the HTML section
 * (bars per fix against the device line, the peak's breakdown stacked beside
 * them). Group names (the phase frames, "micro_step (train.c:27)") are the
 * caller's: names[g] for group g, NULL where there is none. */
#ifndef CA_FIXES_OUT_H
#define CA_FIXES_OUT_H
#include <stdio.h>

#include "reports/diagnose/fixes.h"
#include "reports/write/json.h"

/* Adds "peak_breakdown", "fixes", "fixes_unavailable",
 * "checkpointing_unavailable" and "fits_on_device" to the object being
 * written (REPORT.md has the schema). */
int ca_fixes_json(ca_json *j, const ca_fix_report *r, const char *const *names);

/* The text report's section "WHAT WOULD FIT". */
int ca_fixes_txt(FILE *f, const ca_fix_report *r, const char *const *names);

/* The HTML page's section: one bar per fix (its range, the prediction
 * marked) against the device's line, the peak's breakdown stacked beside;
 * its heading's id is "fixes" + id_suffix (NULL: none). */
int ca_fixes_html(FILE *f, const ca_fix_report *r, const char *const *names, const char *id_suffix);

#endif
