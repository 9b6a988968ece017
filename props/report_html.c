/* report_html.c - the static HTML page of a campaign (see report_html.h): result table and each
 * failing case drawn as per-rank boxes over the global tensor's 2-d view, differing elements
 * marked. The page is built in memory and written at close. */
#define _POSIX_C_SOURCE 200809L
#include "props/report_html.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "props/report.h"
#include "reshard/dtype.h"

#define DIFF_KEEP_MAX (1 << 20)
#define DIFF_DRAW_MAX 20000
#define DIFF_LIST_MAX 24

struct rs_html {
  char path[4096];
  char *rows_buf, *body_buf;
  size_t rows_len, body_len;
  FILE *rows, *body;
  const char *campaign;
  char *command;
  int nfail;
};

static rs_status nomem(void) { return rs_fail(RS_ERR_NOMEM, "--report: out of memory"); }

rs_status rs_html_open(const char *dir, const char *campaign, const char *command, rs_html **out) {
  *out = NULL;
  if (!campaign[0] || strspn(campaign, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
                          strlen(campaign))
    return rs_fail(RS_ERR_INVALID, "--report: campaign name '%s' (letters, digits, '.', '_', '-' only)", campaign);
  struct stat sb;
  if (lstat(dir, &sb) != 0) {
    if (errno != ENOENT || mkdir(dir, 0777) != 0)
      return rs_fail(RS_ERR_IO, "--report: cannot create %s: %s", dir, strerror(errno));
  } else if (!S_ISDIR(sb.st_mode)) {
    return rs_fail(RS_ERR_IO, "--report: %s is not a directory", dir);
  }
  rs_html *h = calloc(1, sizeof *h);
  if (!h) return nomem();
  int n = snprintf(h->path, sizeof h->path, "%s/%s.html", dir, campaign);
  h->campaign = campaign;
  h->command = strdup(command ? command : "");
  h->rows = open_memstream(&h->rows_buf, &h->rows_len);
  h->body = open_memstream(&h->body_buf, &h->body_len);
  if (n < 0 || (size_t)n >= sizeof h->path || !h->command || !h->rows || !h->body) {
    rs_html_discard(h);
    return n < 0 || (size_t)n >= sizeof h->path ? rs_fail(RS_ERR_INVALID, "--report: path too long") : nomem();
  }
  *out = h;
  return RS_OK;
}

void rs_html_discard(rs_html *h) {
  if (!h) return;
  if (h->rows) fclose(h->rows);
  if (h->body) fclose(h->body);
  free(h->rows_buf);
  free(h->body_buf);
  free(h->command);
  free(h);
}

rs_status rs_html_row(rs_html *h, const char *name, int64_t pass, int64_t fail, int64_t skip) {
  const char *cls = fail ? "fail" : pass ? "pass" : "skip";
  fprintf(h->rows, "<tr class=\"%s\"><td>", cls);
  rs__xml_escape(h->rows, name);
  fprintf(h->rows, "</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%s</td></tr>\n", (long long)pass,
          (long long)fail, (long long)skip, fail ? "FAILED" : pass ? "passed" : "skipped");
  return RS_OK;
}

/* ---- drawing ---- */

/* The 2-d view: rows = product of all dims but the last, cols = the last dim (a 0-d tensor is 1x1,
 * a 1-d one a single row); a flat row-major index g sits at (g / cols, g % cols). */
typedef struct view {
  int ndim;
  const int64_t *shape;
  int64_t rows, cols;
  double cw, ch; /* cell width and height in px */
} view;

static void view_init(view *v, int ndim, const int64_t *shape) {
  v->ndim = ndim;
  v->shape = shape;
  v->cols = ndim == 0 ? 1 : shape[ndim - 1];
  v->rows = 1;
  for (int d = 0; d + 1 < ndim; d++) v->rows *= shape[d];
  if (v->cols < 1) v->cols = 1;
  if (v->rows < 1) v->rows = 1;
  double cw = 520.0 / (double)v->cols, ch = 640.0 / (double)v->rows;
  if (cw > 36) cw = 36;
  if (cw < 2) cw = 2;
  v->cw = cw;
  v->ch = ch < cw ? (ch < 2 ? 2 : ch) : cw;
}

/* Calls fn for each rectangle (in cells) a box covers in the 2-d view. */
typedef void (*rect_fn)(void *ctx, int64_t r0, int64_t c0, int64_t nr, int64_t nc);

static void box_rects(const view *v, const rs_html_box *b, rect_fn fn, void *ctx) {
  for (int d = 0; d < v->ndim; d++)
    if (b->size[d] <= 0) return;
  if (v->ndim <= 1) {
    fn(ctx, 0, v->ndim ? b->start[0] : 0, 1, v->ndim ? b->size[0] : 1);
    return;
  }
  int outer = v->ndim - 2; /* dims 0..outer-1: one rectangle per index combination in the box */
  int64_t idx[RS_MAX_DIMS] = {0};
  for (;;) {
    int64_t row = 0;
    for (int d = 0; d < outer; d++) row = row * v->shape[d] + b->start[d] + idx[d];
    row = row * v->shape[outer] + b->start[outer];
    fn(ctx, row, b->start[v->ndim - 1], b->size[outer], b->size[v->ndim - 1]);
    int d = outer - 1;
    while (d >= 0 && ++idx[d] == b->size[d]) idx[d--] = 0;
    if (d < 0) break;
  }
}

typedef struct draw_ctx {
  FILE *f;
  const view *v;
  int group;
  int64_t first_r, first_c, first_nr, first_nc;
  int have_first;
} draw_ctx;

static void draw_rect(void *vctx, int64_t r0, int64_t c0, int64_t nr, int64_t nc) {
  draw_ctx *x = vctx;
  fprintf(x->f, "<rect class=\"g%d\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>", x->group % 12,
          (double)c0 * x->v->cw, (double)r0 * x->v->ch, (double)nc * x->v->cw, (double)nr * x->v->ch);
  if (!x->have_first || nr * nc > x->first_nr * x->first_nc) {
    x->first_r = r0, x->first_c = c0, x->first_nr = nr, x->first_nc = nc;
    x->have_first = 1;
  }
}

static int same_box(const view *v, const rs_html_box *a, const rs_html_box *b) {
  for (int d = 0; d < v->ndim; d++)
    if (a->start[d] != b->start[d] || a->size[d] != b->size[d]) return 0;
  return 1;
}

static int box_empty(const view *v, const rs_html_box *b) {
  for (int d = 0; d < v->ndim; d++)
    if (b->size[d] <= 0) return 1;
  return 0;
}

/* The ranks holding the same box as boxes[i] (replicas), as "r0 r4 r8" (at most 6, then "+k"). */
static void group_label(const view *v, const rs_html_layout *l, int i, char *buf, size_t cap) {
  size_t n = 0;
  int shown = 0, more = 0;
  buf[0] = 0;
  for (int j = i; j < l->nboxes; j++) {
    if (!same_box(v, &l->boxes[i], &l->boxes[j])) continue;
    if (shown < 6 && n + 16 < cap) {
      n += (size_t)snprintf(buf + n, cap - n, "%sr%d", shown ? " " : "", (int)l->boxes[j].rank);
      shown++;
    } else {
      more++;
    }
  }
  if (more && n + 16 < cap) snprintf(buf + n, cap - n, " +%d", more);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

typedef struct label {
  char text[128];
  double x, y, fs;
} label;
#define LABELS_MAX 512

static void draw_layout(FILE *f, const view *v, const char *title, const rs_html_layout *l,
                        const rs_html_diff *diff) {
  double W = (double)v->cols * v->cw, H = (double)v->rows * v->ch;
  fprintf(f, "<figure><figcaption>%s: <code>", title);
  rs__xml_escape(f, l->text ? l->text : "");
  fprintf(f, "</code></figcaption>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
             "viewBox=\"-1 -1 %.2f %.2f\" role=\"img\">",
          W + 2, H + 2, W + 2, H + 2);
  fprintf(f, "<rect class=\"tensor\" x=\"0\" y=\"0\" width=\"%.2f\" height=\"%.2f\"/>", W, H);
  /* grid lines where cells are big enough to see */
  if (v->cw >= 6)
    for (int64_t c = 1; c < v->cols; c++)
      fprintf(f, "<line class=\"cell\" x1=\"%.2f\" y1=\"0\" x2=\"%.2f\" y2=\"%.2f\"/>", (double)c * v->cw,
              (double)c * v->cw, H);
  if (v->ch >= 6)
    for (int64_t r = 1; r < v->rows; r++)
      fprintf(f, "<line class=\"cell\" x1=\"0\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\"/>", (double)r * v->ch, W,
              (double)r * v->ch);
  /* boxes: one colour per distinct box (replicas share it), labelled with their ranks */
  int *group = calloc((size_t)(l->nboxes ? l->nboxes : 1), sizeof *group);
  label *labels = calloc(LABELS_MAX, sizeof *labels);
  int ngroups = 0, nlabels = 0;
  if (!labels) nlabels = LABELS_MAX;
  for (int i = 0; group && i < l->nboxes; i++) {
    group[i] = -1;
    for (int j = 0; j < i; j++)
      if (group[j] >= 0 && same_box(v, &l->boxes[i], &l->boxes[j])) {
        group[i] = group[j];
        break;
      }
    if (group[i] >= 0 || box_empty(v, &l->boxes[i])) continue;
    group[i] = ngroups++;
    draw_ctx x = {f, v, group[i], 0, 0, 0, 0, 0};
    box_rects(v, &l->boxes[i], draw_rect, &x);
    if (x.have_first && nlabels < LABELS_MAX) {
      label *lb = &labels[nlabels++];
      group_label(v, l, i, lb->text, sizeof lb->text);
      double fh = (double)x.first_nr * v->ch * 0.45, fw = (double)x.first_nc * v->cw / (0.62 * (double)(strlen(lb->text) + 1));
      lb->fs = fh < fw ? fh : fw;
      if (lb->fs > 14) lb->fs = 14;
      lb->x = ((double)x.first_c + (double)x.first_nc / 2) * v->cw;
      lb->y = ((double)x.first_r + (double)x.first_nr / 2) * v->ch + lb->fs * 0.35;
    }
  }
  /* differing elements */
  int64_t drawn = 0;
  if (diff && diff->n)
    for (int64_t k = 0; k < diff->n && drawn < DIFF_DRAW_MAX; k++, drawn++) {
      int64_t g = diff->index[k];
      fprintf(f, "<rect class=\"diff\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/>",
              (double)(g % v->cols) * v->cw, (double)(g / v->cols) * v->ch, v->cw, v->ch);
    }
  /* labels last, above the marks */
  for (int k = 0; labels && k < nlabels; k++)
    if (labels[k].fs >= 5)
      fprintf(f, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%.1f\">%s</text>", labels[k].x, labels[k].y, labels[k].fs,
              labels[k].text);
  free(labels);
  fprintf(f, "</svg>\n<table class=\"legend\"><tr><th></th><th>ranks</th><th>box start</th><th>box size</th></tr>\n");
  for (int i = 0; group && i < l->nboxes; i++) {
    int first = 1;
    for (int j = 0; j < i; j++)
      if (same_box(v, &l->boxes[i], &l->boxes[j])) first = 0;
    if (!first) continue;
    char lab[128];
    group_label(v, l, i, lab, sizeof lab);
    int empty = box_empty(v, &l->boxes[i]);
    fprintf(f, "<tr><td><span class=\"sw g%d%s\"></span></td><td>%s</td><td>(", empty ? 0 : group[i] % 12,
            empty ? " empty" : "", lab);
    for (int d = 0; d < v->ndim; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)l->boxes[i].start[d]);
    fprintf(f, ")</td><td>(");
    for (int d = 0; d < v->ndim; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)l->boxes[i].size[d]);
    fprintf(f, ")%s</td></tr>\n", empty ? " empty" : "");
  }
  fprintf(f, "</table></figure>\n");
  free(group);
}

static void write_index(FILE *f, const view *v, int64_t g) {
  int64_t idx[RS_MAX_DIMS];
  for (int d = v->ndim - 1; d >= 0; d--) {
    idx[d] = v->shape[d] ? g % v->shape[d] : 0;
    g = v->shape[d] ? g / v->shape[d] : 0;
  }
  fputc('(', f);
  for (int d = 0; d < v->ndim; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)idx[d]);
  fputc(')', f);
}

/* The global tensor line, both layouts drawn and the list of differing elements. */
static void draw_failure_layouts(FILE *f, const rs_html_failure *fl) {
  view v;
  view_init(&v, fl->ndim, fl->shape);
  fprintf(f, "<p>global tensor (");
  for (int d = 0; d < fl->ndim; d++) fprintf(f, "%s%lld", d ? ", " : "", (long long)fl->shape[d]);
  fprintf(f, ")%s", fl->dtype ? " " : "");
  if (fl->dtype) rs__xml_escape(f, fl->dtype);
  if (fl->mesh) {
    fprintf(f, " on mesh ");
    rs__xml_escape(f, fl->mesh);
  }
  fprintf(f, "; drawn as %lld x %lld (rows: all dims but the last)</p>\n", (long long)v.rows, (long long)v.cols);
  const rs_html_diff *d = fl->diff;
  fprintf(f, "<div class=\"layouts\">\n");
  draw_layout(f, &v, "source", &fl->src, d && d->on_src ? d : NULL);
  draw_layout(f, &v, "destination", &fl->dst, d && !d->on_src ? d : NULL);
  fprintf(f, "</div>\n");
  if (d && d->n) {
    fprintf(f, "<p class=\"difflist\"><span class=\"sw diffsw\"></span> %lld element(s) of the %s differ from the "
               "oracle%s: ",
            (long long)d->n, d->on_src ? "source layout (round trip)" : "destination layout",
            d->n > DIFF_DRAW_MAX ? " (the first 20,000 marked)" : "");
    for (int64_t k = 0; k < d->n && k < DIFF_LIST_MAX; k++) {
      if (k) fputs(", ", f);
      write_index(f, &v, d->index[k]);
    }
    fprintf(f, "%s</p>\n", d->n > DIFF_LIST_MAX ? ", ..." : "");
  } else if (!d) {
    fprintf(f, "<p class=\"difflist\">differing elements not marked (the message above names the first)</p>\n");
  } else {
    fprintf(f, "<p class=\"difflist\">no element compared different (the failure is in the plan, the shapes or "
               "the message above)</p>\n");
  }
}

rs_status rs_html_failure_add(rs_html *h, const rs_html_failure *fl) {
  FILE *f = h->body;
  h->nfail++;
  fprintf(f, "<section class=\"failure\" id=\"f%d\"><h2>FAIL ", h->nfail);
  rs__xml_escape(f, fl->name);
  fprintf(f, "</h2>\n<pre class=\"msg\">");
  rs__xml_text(f, fl->message ? fl->message : "");
  fprintf(f, "</pre>\n");
  if (fl->replay && fl->replay[0]) {
    fprintf(f, "<p>replay: <code class=\"cmd\">");
    rs__xml_escape(f, fl->replay);
    fprintf(f, "</code></p>\n");
  }
  /* a failure without layouts (a P2P model, a checkpoint, a TP case): message, replay and case only */
  if (fl->src.nboxes || fl->dst.nboxes) draw_failure_layouts(f, fl);
  if (fl->case_json) {
    fprintf(f, "<details open><summary>shrunk case</summary><pre>");
    rs__xml_text(f, fl->case_json);
    fprintf(f, "</pre></details>\n");
  }
  fprintf(f, "</section>\n");
  return ferror(f) ? nomem() : RS_OK;
}

rs_status rs_html_boxes_of(const rs_case *c, const rs_sharding *s, rs_html_box **boxes, int *n) {
  *boxes = calloc((size_t)(c->mesh.nranks ? c->mesh.nranks : 1), sizeof **boxes);
  *n = 0;
  if (!*boxes) return nomem();
  for (int pos = 0; pos < c->mesh.nranks; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS];
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_html_box *b = &(*boxes)[pos];
    b->rank = c->mesh.ranks[pos];
    rs_local_box(&c->mesh, s, &c->tensor, coord, b->start, b->size);
  }
  *n = c->mesh.nranks;
  return RS_OK;
}

rs_status rs_html_case_failure(rs_html *h, const char *name, const rs_case *c, const char *message,
                               const char *replay, const rs_html_diff *diff) {
  rs_html_box *sb = NULL, *db = NULL;
  int ns = 0, nd = 0;
  rs_status st = rs_html_boxes_of(c, &c->src, &sb, &ns);
  if (st == RS_OK) st = rs_html_boxes_of(c, &c->dst, &db, &nd);
  char src[512], dst[512], mesh[1024];
  rs_format_sharding(&c->src, src, sizeof src);
  rs_format_sharding(&c->dst, dst, sizeof dst);
  size_t m = 0;
  for (int d = 0; d < c->mesh.ndim && m + 24 < sizeof mesh; d++)
    m += (size_t)snprintf(mesh + m, sizeof mesh - m, "%s%lld", d ? "x" : "", (long long)c->mesh.size[d]);
  for (int p = 0; p < c->mesh.nranks && m + 24 < sizeof mesh; p++)
    m += (size_t)snprintf(mesh + m, sizeof mesh - m, "%s%d", p ? "," : ", ranks ", (int)c->mesh.ranks[p]);
  char *cj = st == RS_OK ? rs_case_to_json(c) : NULL;
  if (st == RS_OK) {
    rs_html_failure fl = {name, message, replay, cj, rs_dtype_name(c->tensor.dtype), c->tensor.ndim,
                          c->tensor.shape, mesh, {src, sb, ns}, {dst, db, nd}, diff};
    st = rs_html_failure_add(h, &fl);
  }
  free(cj);
  free(sb);
  free(db);
  return st;
}

/* ---- differing elements ---- */

static rs_status diff_push(rs_html_diff *d, int64_t g) {
  if (d->n >= DIFF_KEEP_MAX) return RS_OK;
  if (d->n == d->cap) {
    int64_t cap = d->cap ? d->cap * 2 : 256;
    int64_t *p = realloc(d->index, (size_t)cap * sizeof *p);
    if (!p) return nomem();
    d->index = p;
    d->cap = cap;
  }
  d->index[d->n++] = g;
  return RS_OK;
}

rs_status rs_html_diff_collect(const rs_case *c, const rs_sharding *layout, const rs_locals *expected,
                               const rs_locals *actual, rs_html_diff *d) {
  int es = rs_dtype_size(c->tensor.dtype), nd = c->tensor.ndim;
  const int64_t *gs = c->tensor.shape;
  for (int pos = 0; pos < c->mesh.nranks && pos < expected->n; pos++) {
    int64_t coord[RS_MAX_MESH_DIMS], start[RS_MAX_DIMS], size[RS_MAX_DIMS], numel = 1;
    rs_mesh_coord(&c->mesh, pos, coord);
    rs_local_box(&c->mesh, layout, &c->tensor, coord, start, size);
    for (int k = 0; k < nd; k++) numel *= size[k];
    const rs_local *e = &expected->r[pos], *a = pos < actual->n ? &actual->r[pos] : NULL;
    int whole = !a || a->ndim != e->ndim || a->nbytes != e->nbytes || e->nbytes != numel * es ||
                (e->ndim && memcmp(a->shape, e->shape, sizeof(int64_t) * (size_t)e->ndim) != 0);
    int64_t idx[RS_MAX_DIMS] = {0};
    for (int64_t i = 0; i < numel; i++) {
      if (whole || memcmp((const char *)a->data + i * es, (const char *)e->data + i * es, (size_t)es) != 0) {
        int64_t g = 0;
        for (int k = 0; k < nd; k++) g = g * gs[k] + start[k] + idx[k];
        if (diff_push(d, g) != RS_OK) return RS_ERR_NOMEM;
      }
      for (int k = nd - 1; k >= 0 && ++idx[k] == size[k]; k--) idx[k] = 0;
    }
  }
  qsort(d->index, (size_t)d->n, sizeof *d->index, cmp_i64);
  int64_t w = 0;
  for (int64_t i = 0; i < d->n; i++)
    if (!w || d->index[w - 1] != d->index[i]) d->index[w++] = d->index[i];
  d->n = w;
  d->on_src = layout == &c->src;
  return RS_OK;
}

void rs_html_diff_free(rs_html_diff *d) {
  free(d->index);
  memset(d, 0, sizeof *d);
}

/* ---- the page ---- */

static const char *CSS =
    "body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;background:#fff}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;color:#b42318;margin:0 0 8px}"
    "code,pre{font:12px/1.35 ui-monospace,monospace}pre{background:#f4f5f7;padding:8px;overflow:auto;"
    "white-space:pre-wrap;max-height:360px}.cmd{background:#eef;padding:2px 4px}"
    "table.results{border-collapse:collapse;margin:12px 0}table.results td,table.results th{border:1px solid #ccd;"
    "padding:3px 10px;text-align:right}table.results td:first-child{text-align:left}"
    "tr.fail{background:#fde2e1}tr.pass{background:#e3f6e8}tr.skip{background:#f4f5f7}"
    ".failure{border-top:2px solid #b42318;padding-top:12px;margin-top:20px}"
    ".layouts{display:flex;flex-wrap:wrap;gap:28px}figure{margin:0}figcaption{font-weight:600;margin-bottom:4px}"
    "svg{display:block;background:#fff}rect.tensor{fill:#fafafa;stroke:#333;stroke-width:1.5}"
    "line.cell{stroke:#000;stroke-opacity:.12;stroke-width:.5}"
    "svg rect[class^=g]{fill-opacity:.6;stroke:#222;stroke-width:1.5}"
    "svg text{text-anchor:middle;font-family:ui-monospace,monospace;fill:#111;paint-order:stroke;stroke:#fff;"
    "stroke-width:2.5px;stroke-opacity:.8}"
    "rect.diff{fill:#e00000;fill-opacity:.85;stroke:#600;stroke-width:.6}"
    "table.legend{border-collapse:collapse;margin-top:6px;font-size:12px}table.legend td,table.legend th"
    "{padding:1px 8px;text-align:left}.sw{display:inline-block;width:14px;height:12px;border:1px solid #222}"
    ".sw.empty{background:#fff;border-style:dashed}.diffsw{background:#e00000}"
    ".g0{fill:#4e79a7;background:#4e79a7}.g1{fill:#f28e2b;background:#f28e2b}.g2{fill:#59a14f;background:#59a14f}"
    ".g3{fill:#edc948;background:#edc948}.g4{fill:#b07aa1;background:#b07aa1}.g5{fill:#76b7b2;background:#76b7b2}"
    ".g6{fill:#ff9da7;background:#ff9da7}.g7{fill:#9c755f;background:#9c755f}.g8{fill:#bab0ac;background:#bab0ac}"
    ".g9{fill:#8cd17d;background:#8cd17d}.g10{fill:#a0cbe8;background:#a0cbe8}.g11{fill:#ffbe7d;background:#ffbe7d}"
    ".ok{color:#1a7f37;font-weight:600}.bad{color:#b42318;font-weight:600}";

rs_status rs_html_close(rs_html *h, const char *summary) {
  if (!h) return RS_OK;
  int bad = fclose(h->rows) != 0;
  bad |= fclose(h->body) != 0;
  h->rows = h->body = NULL;
  if (bad) {
    rs_html_discard(h);
    return nomem();
  }
  FILE *f = fopen(h->path, "w");
  if (!f) {
    rs_status st = rs_fail(RS_ERR_IO, "--report: cannot write %s: %s", h->path, strerror(errno));
    rs_html_discard(h);
    return st;
  }
  fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>reshard %s</title>"
             "<style>%s</style></head>\n<body>\n<h1>reshard %s: <span class=\"%s\">%s</span></h1>\n",
          h->campaign, CSS, h->campaign, h->nfail ? "bad" : "ok", h->nfail ? "FAILED" : "passed");
  fprintf(f, "<p><code>");
  rs__xml_escape(f, h->command);
  fprintf(f, "</code></p>\n<p>");
  rs__xml_escape(f, summary ? summary : "");
  fprintf(f, "</p>\n<table class=\"results\"><tr><th>property</th><th>pass</th><th>fail</th><th>skip</th>"
             "<th></th></tr>\n%s</table>\n",
          h->rows_buf ? h->rows_buf : "");
  if (h->nfail)
    fprintf(f, "<p>Each failing case is drawn as its layouts: the global tensor's 2-d view, one coloured box per "
               "distinct local box with the ranks that hold it; elements that differ from the oracle are red.</p>\n");
  fputs(h->body_buf ? h->body_buf : "", f);
  fprintf(f, "</body></html>\n");
  int ok = !ferror(f);
  ok &= fclose(f) == 0;
  rs_status st = ok ? RS_OK : rs_fail(RS_ERR_IO, "--report: cannot write %s", h->path);
  rs_html_discard(h);
  return st;
}
