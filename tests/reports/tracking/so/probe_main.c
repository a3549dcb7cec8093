/* Leaks through the shared object from user_code(): the report's leak must
 * start at user_code, not inside the library. */
#include <stddef.h>
#include <stdio.h>

void *probe_alloc(size_t n);
void probe_step(void);
int probe_report(const char *prefix);

__attribute__((noinline)) static void user_code(void) {
    probe_alloc(1 << 20);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    for (int i = 0; i < 6; i++) {
        user_code();
        probe_step();
    }
    return probe_report(argv[1]) == 0 ? 0 : 1;
}
