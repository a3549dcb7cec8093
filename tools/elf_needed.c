#include "tools/elf_needed.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file offset of a virtual address, through the PT_LOAD that maps it. */
static long offset_of(const Elf64_Phdr *ph, int n, Elf64_Addr addr) {
    for (int i = 0; i < n; i++)
        if (ph[i].p_type == PT_LOAD && addr >= ph[i].p_vaddr && addr - ph[i].p_vaddr < ph[i].p_filesz)
            return (long)(ph[i].p_offset + (addr - ph[i].p_vaddr));
    return -1;
}

static int read_at(FILE *f, long off, void *buf, size_t n) {
    return off >= 0 && fseek(f, off, SEEK_SET) == 0 && fread(buf, 1, n, f) == n ? 0 : -1;
}

int ca_elf_needed(const char *path, void (*fn)(const char *name, void *ctx), void *ctx) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    Elf64_Ehdr eh;
    Elf64_Phdr *ph = NULL;
    Elf64_Dyn *dyn = NULL;
    int rc = -1;
    if (read_at(f, 0, &eh, sizeof eh) != 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_phentsize != sizeof *ph || eh.e_phnum == 0 || eh.e_phnum > 4096)
        goto out;
    if (!(ph = calloc(eh.e_phnum, sizeof *ph)) || read_at(f, (long)eh.e_phoff, ph, eh.e_phnum * sizeof *ph) != 0) goto out;
    const Elf64_Phdr *d = NULL;
    for (int i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_DYNAMIC) d = &ph[i];
    if (!d || d->p_filesz == 0 || d->p_filesz > (1 << 20)) goto out;
    size_t nd = d->p_filesz / sizeof *dyn;
    if (!(dyn = malloc(nd * sizeof *dyn)) || read_at(f, (long)d->p_offset, dyn, nd * sizeof *dyn) != 0) goto out;
    long strtab = -1;
    for (size_t i = 0; i < nd && dyn[i].d_tag != DT_NULL; i++)
        if (dyn[i].d_tag == DT_STRTAB) strtab = offset_of(ph, eh.e_phnum, dyn[i].d_un.d_ptr);
    if (strtab < 0) goto out;
    for (size_t i = 0; i < nd && dyn[i].d_tag != DT_NULL; i++) {
        if (dyn[i].d_tag != DT_NEEDED) continue;
        char name[256] = "";
        if (fseek(f, strtab + (long)dyn[i].d_un.d_val, SEEK_SET) != 0 || !fgets(name, sizeof name, f)) continue;
        fn(name, ctx);
    }
    rc = 0;
out:
    free(dyn);
    free(ph);
    fclose(f);
    return rc;
}
