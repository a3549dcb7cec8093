/* The fixes' input from a tracker's state (reports/tracker.h): what the live
 * report and cudalloc-report predict from.
 *
 * Lifetimes come from the event ring: an allocation and the free of its
 * address; a free of an allocation made before the ring began, and an
 * allocation live now that the ring never saw, were born before it (they
 * are persistent to any iteration in the ring). Only iterations whose start
 * the ring holds can be analysed. With call stacks, each allocation's group
 * is its phase (phases.h), for the breakdown by frame. */
#ifndef CA_FIXES_TRACK_H
#define CA_FIXES_TRACK_H
#include "reports/diagnose/fixes.h"
#include "reports/track/tracker.h"

/* capacity: the device's size (0: unknown); needed: what a failing
 * iteration needed at least (0: none; see ca_fix_input). 0, or -1 when
 * memory ran out. */
int ca_fixes_from_track(const ca_track_snap *s, uint64_t capacity, uint64_t needed, ca_fix_report *out);

#endif
