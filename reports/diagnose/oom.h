/* Why an allocation failed, and what to do about it.
 *
 * Verdicts, with free = the device's own free memory + what the allocator
 * caches (reserved - allocated):
 *   CA_OOM_FRAGMENTED  free >= the request: the memory is there, in pieces
 *                      none of which is large enough;
 *   CA_OOM_LEAK        free < the request <= free + the bytes leaking sites
 *                      have piled up: without the leak it would fit;
 *   CA_OOM_NOT_THERE   otherwise: the working set does not fit.
 * And first of all, named "not_there" too:
 *   CA_OOM_BEYOND      the request > device_total (the device, or the cap):
 *                      it could never fit, whatever is freed. Not said when
 *                      the total is inferred (device_total_inferred) or
 *                      not known (0).
 * Offline without the device's figures (device_total 0, device_free 0), the
 * request is judged against what the allocator had free and cached. */
#ifndef CA_OOM_H
#define CA_OOM_H
#include <stddef.h>
#include <stdint.h>

#include "reports/track/tracker.h"

/* The allocator's account of a failed allocation (ca_malloc's ca_oom_info),
 * given after ca_malloc returned CA_ERR_OOM: the tracker completes its OOM
 * record and ca_oom_assess judges it. */
void ca_oom_diagnose(ca_tracker *t, const ca_oom_info *info);

/* Judges an OOM record from the call sites as they stand at the failure
 * (sites[i] is site i's; a ca_oom_judge_fn, track/tracker.h): the bytes the
 * leaking sites hold (the leak rule, leaks.h), the CA_OOM_TOP sites holding
 * the most, and the verdict. */
void ca_oom_assess(ca_oom_record *r, const ca_site_stat *sites, size_t n_sites, uint32_t iteration);

ca_oom_verdict ca_oom_judge(const ca_oom_info *info, uint64_t leaked_bytes);
const char *ca_oom_verdict_name(ca_oom_verdict v); /* "not_there", "fragmented", "leak" (BEYOND: "not_there") */
const char *ca_oom_verdict_text(ca_oom_verdict v); /* one sentence */

/* The advice that fits the verdict, as a list of one-line items (static
 * storage, NULL-terminated). For CA_OOM_NOT_THERE it starts with the memory
 * fixes in general words; ca_oom_advice_general leaves them out, for reports
 * that name the fixes predicted for the run (reports/write/fixes_text.h). */
const char *const *ca_oom_advice(ca_oom_verdict v);
const char *const *ca_oom_advice_general(ca_oom_verdict v);

#endif
