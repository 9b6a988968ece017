/* report_html.h - `--report DIR`: one static HTML page per campaign (DIR/<campaign>.html) that a
 * person opens after CI: the property table, and each failing case drawn as PyTorch's
 * visualize_sharding draws a layout (the global tensor's 2-d view as a grid, each rank's box
 * outlined, coloured and labelled), source and destination side by side, the elements that differ
 * from the oracle marked. Self-contained: inline SVG and CSS, no script, nothing fetched.
 *
 * Use from any campaign driver (reshard check, reshard conform, ...):
 *   rs_html *h;  rs_html_open(dir, "check", "reshard check --seed 1", &h);
 *   rs_html_row(h, "greedy_oracle", pass, fail, skip);            // per property or fixture file
 *   rs_html_case_failure(h, "greedy_oracle", &shrunk_case, msg, "reshard replay F.json", diff);
 *   rs_html_close(h, "seed 1: 2000 cases, 1 failing property");   // writes the page
 * where `diff` comes from rs_html_diff_collect (expected vs actual locals of a layout), or is NULL.
 * Callers with layouts that are not an rs_case (e.g. a backend's own boxes) fill an rs_html_failure
 * by hand and call rs_html_failure_add. */
#ifndef RS_PROPS_REPORT_HTML_H
#define RS_PROPS_REPORT_HTML_H

#include <stdint.h>
#include "reshard/case.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One rank's box over the global tensor (start/size per tensor dim; a size of 0 = empty). */
typedef struct rs_html_box {
  int32_t rank; /* world rank (the label) */
  int64_t start[RS_MAX_DIMS], size[RS_MAX_DIMS];
} rs_html_box;

typedef struct rs_html_layout {
  const char *text;         /* e.g. "S(0)[1]S(0)[0],P(sum)" or "[S(0), R]" */
  const rs_html_box *boxes; /* one per rank that holds the tensor */
  int nboxes;
} rs_html_layout;

/* Differing elements as flat row-major indices into the global tensor (sorted, distinct), and
 * which layout they were found in (0: dst, 1: src - a round trip compares against the source). */
typedef struct rs_html_diff {
  int64_t *index;
  int64_t n, cap;
  int on_src;
} rs_html_diff;

typedef struct rs_html_failure {
  const char *name;      /* property or fixture file */
  const char *message;   /* may hold several lines */
  const char *replay;    /* the command that replays it */
  const char *case_json; /* the shrunk case (shown verbatim), may be NULL */
  const char *dtype;     /* may be NULL */
  int ndim;
  const int64_t *shape;  /* the global tensor */
  const char *mesh;      /* e.g. "2x3 ranks 0,1,2,3,4,5", may be NULL */
  rs_html_layout src, dst;   /* both without boxes: nothing drawn (message, replay, case only) */
  const rs_html_diff *diff; /* may be NULL: nothing marked (the page says so) */
} rs_html_failure;

typedef struct rs_html rs_html;

/* Start the page DIR/<campaign>.html (DIR is created when missing; a campaign name may hold only
 * [A-Za-z0-9._-]). `command` is what ran, shown at the top. */
rs_status rs_html_open(const char *dir, const char *campaign, const char *command, rs_html **out);
/* One row of the result table. */
rs_status rs_html_row(rs_html *h, const char *name, int64_t pass, int64_t fail, int64_t skip);
rs_status rs_html_failure_add(rs_html *h, const rs_html_failure *f);
/* The same for a redistribute case: the boxes of c->src and c->dst from the case. */
rs_status rs_html_case_failure(rs_html *h, const char *name, const rs_case *c, const char *message,
                               const char *replay, const rs_html_diff *diff);
/* Write the page (summary line at the top) and free h; h may be NULL. */
rs_status rs_html_close(rs_html *h, const char *summary);
/* Free h without writing. */
void rs_html_discard(rs_html *h);

/* Every rank's box of layout s of case c (boxes malloc'd; caller frees *boxes). */
rs_status rs_html_boxes_of(const rs_case *c, const rs_sharding *s, rs_html_box **boxes, int *n);
/* Add to d the global indices of every element whose bits differ between expected and actual
 * locals of `layout` (by mesh position; a rank whose shape differs marks its whole box). At most
 * 1 << 20 indices are kept. */
rs_status rs_html_diff_collect(const rs_case *c, const rs_sharding *layout, const rs_locals *expected,
                               const rs_locals *actual, rs_html_diff *d);
void rs_html_diff_free(rs_html_diff *d);

#ifdef __cplusplus
}
#endif
#endif
