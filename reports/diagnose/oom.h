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
 *                      it could never fit, whatever is freed. */
#ifndef CA_OOM_H
#define CA_OOM_H
#include <stdint.h>

#include "reports/track/tracker.h"

ca_oom_verdict ca_oom_judge(const ca_oom_info *info, uint64_t leaked_bytes);
const char *ca_oom_verdict_name(ca_oom_verdict v); /* "not_there", "fragmented", "leak" (BEYOND: "not_there") */
const char *ca_oom_verdict_text(ca_oom_verdict v); /* one sentence */

/* The advice that fits the verdict, as a list of one-line items (static
 * storage, NULL-terminated). */
const char *const *ca_oom_advice(ca_oom_verdict v);

#endif
