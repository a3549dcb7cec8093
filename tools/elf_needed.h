/* The libraries an ELF executable names in its dynamic section (DT_NEEDED),
 * read from the file without loading it: the launcher asks whether a program
 * links a sanitizer runtime, which must come first in LD_PRELOAD. */
#ifndef CA_ELF_NEEDED_H
#define CA_ELF_NEEDED_H

#include <stddef.h>

/* Calls fn(name, ctx) for each DT_NEEDED entry of the 64-bit ELF file at
 * path, in order. Returns 0, or -1 when it is not such a file (a script, a
 * static program) or cannot be read. */
int ca_elf_needed(const char *path, void (*fn)(const char *name, void *ctx), void *ctx);

#endif
