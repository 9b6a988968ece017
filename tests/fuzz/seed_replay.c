/* seed_replay.c - main() for a fuzz target outside libFuzzer: feeds every file of a seed corpus
 * directory to LLVMFuzzerTestOneInput once (a target abort()s on a broken invariant), so the
 * corpora are ordinary regression tests in builds without -DRS_FUZZ=ON. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s SEED_DIR\n", argv[0]);
    return 2;
  }
  DIR *d = opendir(argv[1]);
  if (!d) {
    fprintf(stderr, "%s: cannot open the seed corpus %s\n", argv[0], argv[1]);
    return 1;
  }
  int n = 0;
  struct dirent *e;
  char path[4096];
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", argv[1], e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, k;
    uint8_t chunk[4096];
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) {
      if (len + k > cap) {
        cap = (len + k) * 2;
        uint8_t *nb = realloc(buf, cap);
        if (!nb) {
          fprintf(stderr, "out of memory reading %s\n", path);
          return 3;
        }
        buf = nb;
      }
      memcpy(buf + len, chunk, k);
      len += k;
    }
    fclose(f);
    /* libFuzzer hands over a buffer of exactly len bytes; so does this, even for an empty file */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) return 3;
    if (len) memcpy(exact, buf, len);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    free(buf);
    n++;
  }
  closedir(d);
  printf("%s: %d seed input(s) replayed\n", argv[1], n);
  return n > 0 ? 0 : 1;
}
