/* report.h - internal to props/: progress line, summary, JUnit/JSON reports. */
#ifndef RS_PROPS_REPORT_H
#define RS_PROPS_REPORT_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include "props/props.h"

typedef struct rs_progress {
  int on;          /* a terminal is attached and progress was asked for */
  double last;     /* time of the last update */
} rs_progress;

double rs_now(void);
void rs_progress_init(rs_progress *p, int enabled);
void rs_progress_update(rs_progress *p, int64_t cases, double elapsed, int failures, int force);
void rs_progress_end(rs_progress *p);

/* Names of the properties that ran, for reports. */
void rs_report_summary(FILE *f, const rs_campaign_opts *o, const rs_campaign_result *r,
                       const int *enabled);
void rs_report_features(FILE *f, const rs_campaign_result *r);
rs_status rs_report_junit(const char *path, const rs_campaign_result *r, const int *enabled);

/* JUnit XML as every campaign writes it (check, ckpt check, p2p check, tp check, and any driver that
 * runs fixture files: one testcase per property and one per fixture file, the file's path as its
 * name). open writes the header (NULL, the error set, when the file cannot be created); `tests`
 * counts the testcases that will follow, `failures` and `skipped` those of them that fail or are
 * skipped. A testcase with `failure` != NULL gets a <failure> whose message is `failure` and whose
 * text is "replay: REPLAY FIXTURE" followed by the contents of the FIXTURE file (the shrunk case);
 * else <skipped/> when `skipped`. close ends the document. Every string is escaped (and invalid
 * UTF-8 replaced), so any message is safe to pass. */
FILE *rs__junit_open(const char *path, const char *suite, int tests, int failures, int skipped, double seconds);
void rs__junit_property(FILE *f, const char *suite, const char *name, const char *failure, const char *replay,
                        const char *fixture, int skipped);
rs_status rs__junit_close(FILE *f, const char *path);
/* The same testcase with its own time (seconds < 0: no time attribute) and skip message (NULL: not
 * skipped), for drivers whose testcases carry them (reshard conform). */
typedef struct rs_junit_case {
  const char *classname, *name;
  double seconds;
  const char *failure, *replay, *fixture, *skipped;
} rs_junit_case;
void rs__junit_testcase(FILE *f, const rs_junit_case *tc);
/* s escaped for a double-quoted XML attribute (line feeds as &#10;), and for element text (line
 * feeds and quotes kept, so the file reads as it prints). */
void rs__xml_escape(FILE *f, const char *s);
void rs__xml_text(FILE *f, const char *s);

/* A campaign's JSON summary: `root` printed (and freed) into the file at `path`, one line feed after. */
rs_status rs__report_json_write(cJSON *root, const char *path);
/* the runner object of check's --json report (props/campaign.c) */
cJSON *rs__campaign_runner_json(const rs_campaign_opts *o, const rs_campaign_result *r, const int *enabled);
rs_status rs_report_json(const char *path, const rs_campaign_opts *o, const rs_campaign_result *r,
                         const int *enabled);

/* mkdir -p DIR; errors name --regress-dir. */
rs_status rs__make_dirs(const char *dir);

#endif
