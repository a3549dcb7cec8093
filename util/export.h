/* Everything is built with -fvisibility=hidden; the few symbols a program or
 * the dynamic loader must see are marked CA_EXPORT. */
#ifndef CA_EXPORT_H
#define CA_EXPORT_H
#define CA_EXPORT __attribute__((visibility("default")))
/* On the declaration of a variable another file reads on a hot path: code
 * compiled with -fPIC then reads it straight, not through the GOT. */
#define CA_HIDDEN __attribute__((visibility("hidden")))
#endif
