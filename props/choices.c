/* choices.c - the recorded stream of random choices every generator draws from. Recording the
 * draws (rather than the generated case) is what lets the shrinker work on plain integers while
 * every shrunk stream still decodes to a valid case. */
#include <stdlib.h>
#include <string.h>
#include "props/props.h"

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* xoshiro256**: fast, and its output is uniform enough for the modulo mapping below. */
static uint64_t next64(rs_choices *ch) {
  uint64_t *s = ch->s;
  uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return r;
}

void rs_choices_seed(rs_choices *ch, uint64_t seed) {
  memset(ch, 0, sizeof *ch);
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) ch->s[i] = splitmix(&x);
}

rs_status rs_choices_replay(rs_choices *ch, const uint64_t *v, size_t n) {
  memset(ch, 0, sizeof *ch);
  ch->replay = 1;
  if (n) {
    ch->v = malloc(n * sizeof *v);
    if (!ch->v) return rs_fail(RS_ERR_NOMEM, "choices: out of memory");
    memcpy(ch->v, v, n * sizeof *v);
  }
  ch->n = ch->cap = n;
  return RS_OK;
}

void rs_choices_free(rs_choices *ch) {
  free(ch->v);
  ch->v = NULL;
  ch->n = ch->cap = ch->pos = 0;
}

uint64_t rs_draw(rs_choices *ch, uint64_t n) {
  uint64_t r;
  if (ch->replay) {
    r = ch->pos < ch->n ? ch->v[ch->pos] : 0;
    ch->pos++;
    return n <= 1 ? 0 : r % n;
  }
  r = n <= 1 ? 0 : next64(ch) % n;
  if (ch->n == ch->cap) {
    size_t cap = ch->cap ? ch->cap * 2 : 64;
    uint64_t *nv = realloc(ch->v, cap * sizeof *nv);
    /* Out of memory only loses the record (shrinking then sees a shorter stream), never the draw. */
    if (!nv) {
      ch->pos++;
      return r;
    }
    ch->v = nv;
    ch->cap = cap;
  }
  ch->v[ch->n++] = r;
  ch->pos++;
  return r;
}

int rs_choices_item(rs_choices *ch, size_t count_at, uint64_t less, size_t start, size_t end) {
  if (ch->nitems >= RS_CHOICE_ITEMS || end <= start || count_at >= start) return -1;
  rs_choice_item *it = &ch->item[ch->nitems];
  it->count_at = (uint32_t)count_at;
  it->less = less;
  it->nspan = 1;
  it->start[0] = (uint32_t)start;
  it->end[0] = (uint32_t)end;
  return ch->nitems++;
}

void rs_choices_item_span(rs_choices *ch, int idx, size_t start, size_t end) {
  if (idx < 0 || idx >= ch->nitems || end <= start) return;
  rs_choice_item *it = &ch->item[idx];
  if (it->nspan >= RS_CHOICE_SPANS || start < it->end[it->nspan - 1]) return;
  it->start[it->nspan] = (uint32_t)start;
  it->end[it->nspan++] = (uint32_t)end;
}
