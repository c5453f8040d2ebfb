/* LD_PRELOAD for bench/link-order.sh: before main, advise the kernel that keel's own mappings are
   read randomly (no readahead), so each page keel touches faults on its own and a page-fault
   profile names every page of code and read-only data a run uses. */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
__attribute__((constructor)) static void advise_random(void) {
  char exe[4096]; ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return; exe[n] = 0;
  FILE *f = fopen("/proc/self/maps", "r"); if (!f) return;
  char line[8192];
  while (fgets(line, sizeof line, f)) {
    unsigned long a, b; char perms[8]; char path[4096] = "";
    if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %4095s", &a, &b, perms, path) < 3) continue;
    if (strcmp(path, exe) == 0 && perms[2] != 'w') madvise((void *)a, b - a, MADV_RANDOM);
  }
  fclose(f);
}
