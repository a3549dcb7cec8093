/* cudalloc's version, one string for every program and the library: the
 * VERSION file's release, and the git commit it was built from when known
 * ("0.1.0 (git 1a2b3c4d5e6f)"; "-dirty" when the checkout had changes). */
#ifndef CA_VERSION_H
#define CA_VERSION_H

const char *ca_version(void);

/* The library's file as programs load it: its soname, "libcudalloc.so.0". */
const char *ca_library_file(void);

/* --version's line on stdout: "cudalloc 0.1.0 (git ...)" for the launcher,
 * "PROG (cudalloc) 0.1.0 (git ...)" for the others, as GNU tools print it. */
void ca_print_version(const char *prog);

#endif
