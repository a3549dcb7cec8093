/* Everything is built with -fvisibility=hidden; the few symbols a program or
 * the dynamic loader must see are marked CA_EXPORT. */
#ifndef CA_EXPORT_H
#define CA_EXPORT_H
#define CA_EXPORT __attribute__((visibility("default")))
#endif
