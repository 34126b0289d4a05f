/* tests/c/test_profiler.c — the profiler: record synthetic events through
 * the runtime hooks (src/profiler/hooks.h) and check all four outputs:
 * the gzipped Chrome trace (parsed back with zlib and a small JSON
 * checker), the XSpace protobuf (decoded from the wire format), the
 * summary JSON/CSV (exact numbers) and the HTML report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "support/oplib.h"
#include "support/runner.h"

#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "opcore/build.h"
#include "opcore/engine.h"
#include "opcore/host.h"
#include "opcore/profiler.h"
#include "opcore/status.h"
#include "profiler/hooks.h"
#include "profiler/prof.h"

static char g_tmp[256];

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *p = malloc(cap);
    size_t r;
    while ((r = fread(p + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0) p = realloc(p, cap *= 2);
    }
    fclose(f);
    p[n] = 0;
    if (len) *len = n;
    return p;
}

static char *read_gz(const char *path, size_t *len)
{
    gzFile g = gzopen(path, "rb");
    if (!g) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *p = malloc(cap);
    int r;
    while ((r = gzread(g, p + n, (unsigned)(cap - n - 1))) > 0) {
        n += (size_t)r;
        if (cap - n - 1 == 0) p = realloc(p, cap *= 2);
    }
    gzclose(g);
    p[n] = 0;
    if (len) *len = n;
    return p;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0, l = strlen(needle);
    for (const char *p = hay; (p = strstr(p, needle)); p += l) n++;
    return n;
}

/* ---- a minimal JSON validator --------------------------------------------- */

static const char *js_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    return p;
}

static const char *js_value(const char *p, int depth);

static const char *js_string(const char *p)
{
    if (*p != '"') return NULL;
    for (p++; *p && *p != '"'; p++) {
        if ((unsigned char)*p < 0x20) return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 0; i < 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", *++p) || !*p) return NULL;
            } else if (!strchr("\"\\/bfnrt", *p) || !*p) {
                return NULL;
            }
        }
    }
    return *p == '"' ? p + 1 : NULL;
}

static const char *js_value(const char *p, int depth)
{
    if (depth > 64) return NULL;
    p = js_ws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        bool obj = *p == '{';
        p = js_ws(p + 1);
        if (*p == close) return p + 1;
        for (;;) {
            if (obj) {
                p = js_string(js_ws(p));
                if (!p) return NULL;
                p = js_ws(p);
                if (*p++ != ':') return NULL;
            }
            p = js_value(p, depth + 1);
            if (!p) return NULL;
            p = js_ws(p);
            if (*p == ',') { p++; continue; }
            if (*p == close) return p + 1;
            return NULL;
        }
    }
    if (*p == '"') return js_string(p);
    if (!strncmp(p, "true", 4)) return p + 4;
    if (!strncmp(p, "false", 5)) return p + 5;
    if (!strncmp(p, "null", 4)) return p + 4;
    char *end;
    if (*p == '-' || (*p >= '0' && *p <= '9')) {
        strtod(p, &end);
        return end > p ? end : NULL;
    }
    return NULL;
}

static bool json_ok(const char *s)
{
    const char *e = js_value(s, 0);
    return e && *js_ws(e) == 0;
}

/* ---- reading protobuf: the library's reader, asserting ------------------------ */

typedef oc__pbr pb;

/* next field: returns false at end; on a LEN field sets sub */
static bool pb_next(pb *b, unsigned *field, unsigned *wt, uint64_t *v, pb *sub)
{
    bool bad = false;
    bool more = oc__pb_next(b, field, wt, v, sub, &bad);
    assert_false(bad);
    if (more && *wt != OC__PB_VARINT && *wt != OC__PB_LEN && *wt != OC__PB_I64)
        fail_msg("unexpected wire type %u", *wt);
    return more;
}

static bool pb_streq(const pb *s, const char *str)
{
    return (size_t)(s->end - s->p) == strlen(str) && !memcmp(s->p, str, strlen(str));
}

typedef struct xp_info {
    int planes;
    bool host_plane, engine_plane;
    int lines, events, host_lines, engine_lines;
    bool core_line[8];
    bool steps_line, device_steps_line;  /* "Steps" on the host; xprof's step-info line id on the engine */
    bool op_metadata;                     /* an event metadata named or displayed as the op */
    bool stat_names[8];                   /* see want_stats */
    bool tf_op_ref;                       /* the op's tf_op string is a stat metadata */
    bool hostname;
    int kernel_events, kernel_group_ids, kernel_tf_ops;
    bool plane_membw;
} xp_info;

static const char *const want_stats[] = {"group_id", "step_name", "tf_op", "correlation_id", "step_num",
                                          "memory_bandwidth", "core_count", "bytes_in"};

static void decode_xplane(const uint8_t *data, size_t n, xp_info *xi)
{
    memset(xi, 0, sizeof *xi);
    pb sp = {data, data + n}, plane;
    unsigned f, wt;
    uint64_t v;
    while (pb_next(&sp, &f, &wt, &v, &plane)) {
        if (f == 4 && wt == 2) { xi->hostname = true; continue; }
        assert_int_equal(f, 1);
        assert_int_equal(wt, 2);
        xi->planes++;
        bool engine = false;
        pb sub;
        pb q = plane;
        /* stat metadata first: their ids name the stats */
        int64_t tf_op_id = -1, group_id = -1, membw_id = -1;
        while (pb_next(&q, &f, &wt, &v, &sub)) {
            if (f == 2) {
                if (pb_streq(&sub, "/host:CPU")) xi->host_plane = true;
                if (pb_streq(&sub, "/device:GPU:0 (opcore engine)")) xi->engine_plane = engine = true;
            }
            else if (f == 5) {
                pb m = sub, val, s3;
                while (pb_next(&m, &f, &wt, &v, &val)) {
                    if (f != 2) continue;
                    int64_t id = 0;
                    pb md = val;
                    while (pb_next(&md, &f, &wt, &v, &s3)) {
                        if (f == 1) id = (int64_t)v;
                        if (f != 2) continue;
                        for (size_t k = 0; k < sizeof want_stats / sizeof *want_stats; k++)
                            if (pb_streq(&s3, want_stats[k])) xi->stat_names[k] = true;
                        if (pb_streq(&s3, "tf_op")) tf_op_id = id;
                        if (pb_streq(&s3, "group_id")) group_id = id;
                        if (pb_streq(&s3, "memory_bandwidth")) membw_id = id;
                        if (pb_streq(&s3, "my_ops/relu_forward:relu_forward")) xi->tf_op_ref = true;
                    }
                }
            }
        }
        q = plane;
        while (pb_next(&q, &f, &wt, &v, &sub)) {
            if (f == 6) { /* plane stats */
                pb st = sub, s3;
                while (pb_next(&st, &f, &wt, &v, &s3))
                    if (engine && f == 1 && (int64_t)v == membw_id) xi->plane_membw = true;
            } else if (f == 3) { /* XLine */
                xi->lines++;
                if (engine) xi->engine_lines++;
                else xi->host_lines++;
                pb l = sub, s2;
                while (pb_next(&l, &f, &wt, &v, &s2)) {
                    if (f == 1 && engine && (int64_t)v == (int64_t)(int32_t)0xdeadbeefu) xi->device_steps_line = true;
                    if (f == 2) {
                        char nm[64] = {0};
                        memcpy(nm, s2.p, (size_t)(s2.end - s2.p) < 63 ? (size_t)(s2.end - s2.p) : 63);
                        int c;
                        if (engine && sscanf(nm, "core %d", &c) == 1 && c >= 0 && c < 8) xi->core_line[c] = true;
                        if (!strcmp(nm, "Steps") && !engine) xi->steps_line = true;
                    }
                    if (f == 4) {
                        xi->events++;
                        /* the event has metadata_id and offset; kernels have stats */
                        pb e = s2, s3;
                        bool md = false, offset = false, group = false, tf = false;
                        while (pb_next(&e, &f, &wt, &v, &s3)) {
                            if (f == 1) md = v > 0;
                            if (f == 2) offset = true;
                            if (f == 4) {
                                pb st = s3, s4;
                                while (pb_next(&st, &f, &wt, &v, &s4)) {
                                    if (f == 1 && (int64_t)v == group_id) group = true;
                                    if (f == 1 && (int64_t)v == tf_op_id) tf = true;
                                }
                            }
                        }
                        assert_true(md);
                        assert_true(offset);
                        if (engine && tf) {
                            xi->kernel_events++;
                            xi->kernel_tf_ops++;
                            if (group) xi->kernel_group_ids++;
                        }
                    }
                }
            } else if (f == 4) { /* event_metadata map entry */
                pb m = sub, val;
                while (pb_next(&m, &f, &wt, &v, &val)) {
                    if (f == 2) {
                        pb md = val, s3;
                        while (pb_next(&md, &f, &wt, &v, &s3))
                            if ((f == 2 || f == 4) && pb_streq(&s3, "my_ops::relu_forward")) xi->op_metadata = true;
                    }
                }
            }
        }
    }
}

/* ---- helpers --------------------------------------------------------------- */

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static int setup_dir(void **state)
{
    (void)state;
    snprintf(g_tmp, sizeof g_tmp, "/tmp/oc_prof_test_%ld", (long)getpid());
    nftw(g_tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static int teardown_dir(void **state)
{
    (void)state;
    if (!getenv("OC_KEEP_TEST_FILES")) nftw(g_tmp, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

static bool file_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && st.st_size > 0;
}

#define OP "my_ops::relu_forward"
#define NCORES 4

/* 3 calls; each: CALL 30 us with SHAPE/ALLOC/DISPATCH/WAIT inside; kernels
 * on cores 0..3 of 10,10,10,20 us, 1000 bytes in and out each. */
static void record_calls(uint64_t base)
{
    for (int call = 0; call < 3; call++) {
        uint64_t t = base + (uint64_t)call * 100000;
        oc__prof_host(OC_PROF_SHAPE, OP, t + 1000, t + 2000);
        oc__prof_host(OC_PROF_ALLOC, OP, t + 2000, t + 3000);
        oc__prof_host(OC_PROF_DISPATCH, OP, t + 3000, t + 4000);
        for (uint32_t c = 0; c < NCORES; c++) {
            oc_prof_counters k = {1000, 1000, 512, 256};
            uint64_t dur = c == 3 ? 20000 : 10000;
            oc__prof_kernel(OP, c, NCORES, t + 4000, t + 4000 + dur, &k);
        }
        oc__prof_host(OC_PROF_WAIT, OP, t + 14000, t + 24000);
        oc__prof_host(OC_PROF_CALL, OP, t, t + 30000);
    }
}

/* The last profile's Chrome trace and summary, checked to be JSON. */
static char *trace_json(void)
{
    char *js = read_gz(oc_profiler_output(OC_PROFILE_OUT_TRACE), NULL);
    assert_non_null(js);
    assert_true(json_ok(js));
    return js;
}

static char *summary_json(void)
{
    char *sj = read_file(oc_profiler_output(OC_PROFILE_OUT_SUMMARY_JSON), NULL);
    assert_non_null(sj);
    assert_true(json_ok(sj));
    return sj;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_off_costs_nothing(void **state)
{
    (void)state;
    assert_false(oc_profiler_enabled());
    assert_false(oc__prof_on());
    oc_prof_counters k = {1, 2, 3, 4};
    oc__prof_kernel(OP, 0, 1, 1, 2, &k);  /* ignored */
    oc__prof_host(OC_PROF_CALL, OP, 1, 2);
    assert_int_equal(oc_profiler_begin("x"), OC_OK);
    assert_int_equal(oc_profiler_end(), OC_OK);
    assert_int_equal(oc_profiler_step(1), OC_OK);
}

static void test_stop_without_start(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_EINVAL);
    assert_non_null(strstr(oc_errmsg(), "no profile is running"));
}

static void test_end_without_begin(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_end(), OC_EINVAL);
    assert_non_null(strstr(oc_errmsg(), "no open block"));
}

static void test_begin_null_name(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_begin(NULL), OC_EINVAL);
}

static void test_start_unknown_type(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, (oc_profile_type)7, 0, NULL), OC_EINVAL);
}

static void test_start_negative_steps(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, -1, NULL), OC_EINVAL);
}

static void test_start_run_name_with_slash(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "a/b"), OC_EINVAL);
    assert_non_null(strstr(oc_errmsg(), "run_name"));
}

static void test_start_unwritable_dir(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start("/proc/nope/x", OC_PROFILE_TRACE, 0, NULL), OC_EIO);
}

static void test_start_while_running(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "err"), OC_OK);
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "err2"), OC_EEXIST);
    assert_non_null(strstr(oc_errmsg(), "already running"));
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);
    assert_string_equal(oc_profiler_output(OC_PROFILE_OUT_RUN_NAME), "err");
}

/* One profile, "full", of every kind of event: 3 calls of record_calls on
 * NCORES cores inside nested blocks "outer <&>" / "inner", a build, steps
 * 0..2, after a 20 ms idle gap. Its run directory goes to run_dir (may be
 * NULL). */
static void record_full(char *run_dir, size_t size)
{
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "full"), OC_OK);
    assert_true(oc_profiler_enabled());
    sleep_ms(20);  /* an idle gap the HTML report does not open on */
    assert_int_equal(oc_profiler_step(0), OC_OK);
    uint64_t base = oc__prof_now();
    assert_int_equal(oc_profiler_begin("outer <&>"), OC_OK);
    assert_int_equal(oc_profiler_begin("inner"), OC_OK);
    record_calls(base);
    oc__prof_host(OC_PROF_BUILD, "relu", base, base + 500);
    assert_int_equal(oc_profiler_end(), OC_OK);
    assert_int_equal(oc_profiler_end(), OC_OK);
    assert_int_equal(oc_profiler_step(1), OC_OK);
    sleep_ms(1);
    assert_int_equal(oc_profiler_step(2), OC_OK);
    sleep_ms(1);
    assert_int_equal(oc_profiler_stop(run_dir, size), OC_OK);
    assert_false(oc_profiler_enabled());
}

static void test_trace_run_dir(void **state)
{
    (void)state;
    char run_dir[1024], want[1024];
    record_full(run_dir, sizeof run_dir);
    snprintf(want, sizeof want, "%s/plugins/profile/full", g_tmp);
    assert_string_equal(run_dir, want);
    assert_string_equal(oc_profiler_output(OC_PROFILE_OUT_RUN_DIR), want);
}

static void test_trace_chrome(void **state)
{
    (void)state;
    char want[1024];
    record_full(NULL, 0);
    const char *tp = oc_profiler_output(OC_PROFILE_OUT_TRACE);
    snprintf(want, sizeof want, "%s/full.trace.json.gz", g_tmp);
    assert_string_equal(tp, want);
    char *js = read_gz(tp, NULL);
    assert_non_null(js);
    assert_true(json_ok(js));
    for (int c = 0; c < NCORES; c++) {
        char nm[128];
        snprintf(nm, sizeof nm, "\"args\":{\"name\":\"core %d\"}", c);
        assert_non_null(strstr(js, nm));
        snprintf(nm, sizeof nm, "\"tid\":%d,\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":%d}", c + 1, c * 16);
        assert_non_null(strstr(js, nm));
    }
    assert_null(strstr(js, "core 4"));
    assert_non_null(strstr(js, "\"name\":\"opcore engine\""));
    assert_non_null(strstr(js, "\"name\":\"main ("));
    assert_int_equal(count(js, "\"cat\":\"kernel\""), 3 * NCORES);
    assert_int_equal(count(js, "\"cat\":\"call\""), 3);
    assert_int_equal(count(js, "\"cat\":\"shape\""), 3);
    assert_int_equal(count(js, "\"cat\":\"wait\""), 3);
    assert_int_equal(count(js, "\"cat\":\"build\""), 1);
    assert_non_null(strstr(js, "\"bytes_in\":1000,\"bytes_out\":1000,\"tcm_bytes\":512,\"stream_bytes\":256"));
    assert_non_null(strstr(js, "\"name\":\"outer <&>\""));
    assert_non_null(strstr(js, "\"name\":\"inner\""));
    assert_int_equal(count(js, "\"ph\":\"i\""), 3);
    assert_non_null(strstr(js, "\"name\":\"step 1\""));
    assert_non_null(strstr(js, "\"name\":\"steps\""));
    free(js);
}

static void test_trace_xspace(void **state)
{
    (void)state;
    char want[1024];
    record_full(NULL, 0);
    const char *xp = oc_profiler_output(OC_PROFILE_OUT_XPLANE);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    snprintf(want, sizeof want, "%s/plugins/profile/full/%s.xplane.pb", g_tmp, host);
    assert_string_equal(xp, want);
    size_t xn;
    char *xb = read_file(xp, &xn);
    assert_non_null(xb);
    xp_info xi;
    decode_xplane((const uint8_t *)xb, xn, &xi);
    assert_int_equal(xi.planes, 2);
    assert_true(xi.host_plane);
    assert_true(xi.engine_plane);
    assert_true(xi.hostname);
    assert_int_equal(xi.engine_lines, NCORES + 1);  /* the cores and the step-info line */
    for (int c = 0; c < NCORES; c++) assert_true(xi.core_line[c]);
    assert_true(xi.steps_line);
    assert_true(xi.device_steps_line);
    assert_true(xi.op_metadata);
    assert_int_equal(xi.kernel_events, 3 * NCORES);
    assert_int_equal(xi.kernel_group_ids, 3 * NCORES);  /* all in step 0 */
    for (size_t k = 0; k < sizeof want_stats / sizeof *want_stats; k++) assert_true(xi.stat_names[k]);
    assert_true(xi.tf_op_ref);
    assert_true(xi.plane_membw);
    free(xb);
}

static void test_trace_summary_json(void **state)
{
    (void)state;
    record_full(NULL, 0);
    char *sj = summary_json();
    assert_non_null(strstr(sj, "\"op\": \"my_ops::relu_forward\", \"calls\": 3, \"total_ms\": 0.090000, "
                               "\"mean_us\": 30.000, \"min_us\": 30.000, \"max_us\": 30.000, "
                               "\"kernel_wall_ms\": 0.060000, \"kernels\": 12, \"ncores\": 4, "
                               "\"core_ms\": [0.030000, 0.030000, 0.030000, 0.060000], \"balance\": 1.6000, "
                               "\"bytes\": 24000, \"tcm_bytes\": 6144, \"stream_bytes\": 3072, "
                               "\"gbps\": 0.4000, \"membw_fraction\": 0.040000, \"source\": \"opcore\"}"));
    assert_non_null(strstr(sj, "\"name\": \"outer <&>\", \"kind\": \"block\", \"count\": 1"));
    assert_non_null(strstr(sj, "\"name\": \"relu\", \"kind\": \"build\", \"count\": 1, \"total_ms\": 0.000500"));
    assert_non_null(strstr(sj, "\"steps\": 3"));
    assert_non_null(strstr(sj, "\"membw_gbps\": 10.000"));
    assert_non_null(strstr(sj, "\"membw_source\": \"set by OPCORE_MEMBW_GBPS\""));
    free(sj);
}

static void test_trace_summary_csv(void **state)
{
    (void)state;
    record_full(NULL, 0);
    char *csv = read_file(oc_profiler_output(OC_PROFILE_OUT_SUMMARY_CSV), NULL);
    assert_non_null(csv);
    assert_non_null(strstr(csv, "op,calls,total_ms,mean_us,min_us,max_us,kernel_wall_ms,kernels,ncores,balance,"
                                "bytes,tcm_bytes,stream_bytes,gbps,membw_fraction,source,core0_ms,core1_ms,core2_ms,core3_ms\n"));
    assert_non_null(strstr(csv, "my_ops::relu_forward,3,0.090000,30.000,30.000,30.000,0.060000,12,4,1.6000,24000,"
                                "6144,3072,0.4000,0.040000,opcore,0.030000,0.030000,0.030000,0.060000\n"));
    free(csv);
}

static void test_trace_html(void **state)
{
    (void)state;
    record_full(NULL, 0);
    char *html = read_file(oc_profiler_output(OC_PROFILE_OUT_HTML), NULL);
    assert_non_null(html);
    assert_non_null(strstr(html, "<!DOCTYPE html>"));
    assert_non_null(strstr(html, "<canvas id=\"cv\">"));
    assert_int_equal(count(html, "<tr class=\"op\" data-op=\"my_ops::relu_forward\" data-source=\"opcore\">"), 1);
    assert_non_null(strstr(html, "outer &lt;&amp;&gt;"));   /* in the blocks table */
    assert_non_null(strstr(html, "\"outer \\u003c&>\""));    /* in the script's data */
    assert_null(strstr(html, "outer <&>"));
    for (int c = 0; c < NCORES; c++) {
        char nm[64];
        snprintf(nm, sizeof nm, "data-core=\"%d\">core %d</div>", c, c);
        assert_non_null(strstr(html, nm));
    }
    assert_int_equal(count(html, "class=\"lane core\""), NCORES);
    assert_null(strstr(html, "src=\"http"));
    assert_null(strstr(html, "<link"));
    assert_null(strstr(html, "@import"));
    /* it opens on the work: from step 0 (at `base`, after the profile started), not from 0 */
    const char *w = strstr(html, "\"work\":[");
    assert_non_null(w);
    char *end;
    unsigned long long lo = strtoull(w + 8, &end, 10), hi = strtoull(end + 1, NULL, 10);
    const char *du = strstr(html, "{\"dur\":");
    assert_non_null(du);
    unsigned long long dur = strtoull(du + 7, NULL, 10);
    assert_true(lo >= 19000000ull);   /* after the 20 ms gap, less a small margin */
    assert_true(hi > lo && hi <= dur);
    free(html);
}

static void test_operator_type(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_OPERATOR, 0, "op"), OC_OK);
    record_calls(oc__prof_now());
    assert_int_equal(oc_profiler_begin("blk"), OC_OK);
    assert_int_equal(oc_profiler_end(), OC_OK);
    sleep_ms(1); /* the synthetic spans end up to 0.3 ms from now */
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);
    char *js = trace_json();
    assert_int_equal(count(js, "\"cat\":\"kernel\""), 3 * NCORES);
    assert_int_equal(count(js, "\"cat\":\"call\""), 3);
    assert_int_equal(count(js, "\"cat\":\"block\""), 1);
    assert_int_equal(count(js, "\"cat\":\"shape\""), 0);
    assert_int_equal(count(js, "\"cat\":\"alloc\""), 0);
    assert_int_equal(count(js, "\"cat\":\"dispatch\""), 0);
    assert_int_equal(count(js, "\"cat\":\"wait\""), 0);
    assert_non_null(strstr(js, "\"profile_type\":\"operator\""));
    free(js);
}

/* The cut-off on the profiler's own clock, set by the test (never a real
 * sleep: 30 ms of real time is not 30 ms of a loaded machine's or
 * valgrind's). */
static void test_ms_duration(void **state)
{
    (void)state;
    uint64_t t = oc__prof_now();
    oc__prof_set_clock(t);
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 30, "dur"), OC_OK);
    oc_prof_counters k = {8, 8, 0, 0};
    oc__prof_kernel("early", 0, 1, t, t + 1000, &k);
    assert_int_equal(oc_profiler_begin("straddles"), OC_OK);
    oc__prof_set_clock(t += 29000000);
    assert_true(oc_profiler_enabled());   /* 29 ms: still recording */
    oc__prof_set_clock(t += 31000000);
    assert_int_equal(oc_profiler_end(), OC_OK);
    oc__prof_kernel("late", 0, 1, t, t + 1000, &k);
    assert_false(oc_profiler_enabled());  /* the cut-off switched recording off */
    assert_int_equal(oc_profiler_begin("after"), OC_OK);
    assert_int_equal(oc_profiler_end(), OC_OK);
    oc__prof_set_clock(t += 1000000);
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);
    oc__prof_set_clock(0);
    char *js = trace_json();
    bool early = strstr(js, "\"name\":\"early\"") != NULL;
    bool late = strstr(js, "\"name\":\"late\"") != NULL;
    bool straddles = strstr(js, "\"name\":\"straddles\"") != NULL;
    bool after = strstr(js, "\"name\":\"after\"") != NULL;
    free(js);
    assert_true(early && straddles);
    assert_false(late || after);
    char *sj = read_file(oc_profiler_output(OC_PROFILE_OUT_SUMMARY_JSON), NULL);
    assert_non_null(sj);
    const char *p = strstr(sj, "\"duration_ms\": ");
    double dms = p ? strtod(p + 15, NULL) : -1;
    free(sj);
    assert_true(dms == 30.0);   /* the cut-off, exactly: the clock is the test's */
}

static void test_unique_run_names(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "same"), OC_OK);
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "same"), OC_OK);
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);
    assert_string_equal(oc_profiler_output(OC_PROFILE_OUT_RUN_NAME), "same_1");
}

/* no run name: a timestamped run */
static void test_timestamped_run_name(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, NULL), OC_OK);
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);
    const char *r = oc_profiler_output(OC_PROFILE_OUT_RUN_NAME);
    assert_int_equal(strlen(r) >= 19 ? 1 : 0, 1);
    assert_true(file_exists(oc_profiler_output(OC_PROFILE_OUT_HTML)));
    assert_true(file_exists(oc_profiler_output(OC_PROFILE_OUT_XPLANE)));
}

/* ---- spans imported from other profilers --------------------------------- */

/* "ts" and "dur" (us) of the first Chrome-trace event after `key`. */
static void ts_dur(const char *js, const char *key, double *ts, double *dur)
{
    const char *p = strstr(js, key);
    assert_non_null(p);
    const char *t = strstr(p, "\"ts\":"), *d = strstr(p, "\"dur\":");
    assert_non_null(t);
    assert_non_null(d);
    *ts = strtod(t + 5, NULL);
    *dur = strtod(d + 6, NULL);
}

static const oc_profiler_span bad_span = {.name = "x", .t0_ns = 10, .t1_ns = 5};

/* Stop the profile: a refused import added nothing to it. */
static void stop_with_nothing_imported(void)
{
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);
    char *sj = summary_json();
    assert_non_null(strstr(sj, "\"imported_events\": 0,"));
    free(sj);
}

static void test_import_without_profile(void **state)
{
    (void)state;
    oc_profiler_span good = {.name = "x", .t0_ns = 1, .t1_ns = 2};
    assert_int_equal(oc_profiler_import("torch", OC_PROFILER_CLOCK_REALTIME, &good, 1), OC_EINVAL);
    assert_non_null(strstr(oc_errmsg(), "no profile is running"));
}

static void test_import_span_ending_before_start(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "imp"), OC_OK);
    assert_int_equal(oc_profiler_import("torch", OC_PROFILER_CLOCK_REALTIME, &bad_span, 1), OC_EINVAL);
    assert_non_null(strstr(oc_errmsg(), "ends (5 ns) before it starts (10 ns)"));
    stop_with_nothing_imported();
}

static void test_import_unknown_clock(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "imp"), OC_OK);
    assert_int_equal(oc_profiler_import("torch", (oc_profiler_clock)9, &bad_span, 1), OC_EINVAL);
    stop_with_nothing_imported();
}

static void test_import_empty_source(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "imp"), OC_OK);
    assert_int_equal(oc_profiler_import("", OC_PROFILER_CLOCK_REALTIME, &bad_span, 1), OC_EINVAL);
    stop_with_nothing_imported();
}

static void test_import(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "imp"), OC_OK);

    /* realtime r0 is read between monotonic m0 and m1; an opcore call
     * 1..2 us after m1, and a span around it from r0 to r0 + (m1 - m0) + 5 us,
     * as PyTorch would record it */
    int64_t tid = (int64_t)syscall(SYS_gettid);
    uint64_t m0 = oc__prof_now();
    int64_t r0 = oc_profiler_now_ns(OC_PROFILER_CLOCK_REALTIME);
    uint64_t m1 = oc__prof_now();
    int64_t around = (int64_t)(m1 - m0) + 5000;
    oc__prof_host(OC_PROF_CALL, OP, m1 + 1000, m1 + 2000);
    oc_prof_counters k = {8, 8, 0, 0};
    oc__prof_kernel(OP, 0, 1, m1 + 1200, m1 + 1800, &k);
    oc_profiler_span sp[] = {
        {"aten::addmm", "cpu_op", "python", tid, r0, r0 + around, true},
        {OP, "cpu_op", NULL, tid, r0 + 500, r0 + around - 500, true},  /* PyTorch's record of the opcore call */
        {"Optimizer.step#SGD.step", "user_annotation", NULL, tid, r0, r0 + around + 1000, false},
        {"worker_op", "cpu_op", "pt_worker", 999999, r0, r0 + 100, true},
        {"too_early", "cpu_op", NULL, tid, r0 - 10000000000LL, r0 - 9000000000LL, true},
    };
    assert_int_equal(oc_profiler_import("torch", OC_PROFILER_CLOCK_REALTIME, sp, 5), OC_OK);
    oc_profiler_span mono = {"mono_span", NULL, NULL, tid, (int64_t)m1 + 100, (int64_t)m1 + 200, false};
    assert_int_equal(oc_profiler_import("other", OC_PROFILER_CLOCK_MONOTONIC, &mono, 1), OC_OK);
    sleep_ms(1);
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);

    char *js = trace_json();
    char key[160];
    snprintf(key, sizeof key, "\"tid\":%lld,\"cat\":\"cpu_op\",\"name\":\"aten::addmm\"", (long long)tid);
    double a_ts, a_dur, c_ts, c_dur;
    ts_dur(js, key, &a_ts, &a_dur);       /* on this thread's track */
    snprintf(key, sizeof key, "\"tid\":%lld,\"cat\":\"call\",\"name\":\"%s\"", (long long)tid, OP);
    ts_dur(js, key, &c_ts, &c_dur);
    /* one clock: the call lies inside the span that was recorded around it */
    assert_true(a_ts <= c_ts && c_ts + c_dur <= a_ts + a_dur);
    /* 1 us after m1, r0 being at most m1 - m0 earlier; give or take the
     * clock reads of the conversion (~10 ns; valgrind makes them slow) and
     * the 3-decimal us of the trace */
    double slack = getenv("OC_UNDER_VALGRIND") ? 2.0 : 0.025;
    assert_true(c_ts - a_ts >= 1.0 - slack && c_ts - a_ts <= 1.0 + (double)(m1 - m0) / 1e3 + slack);
    assert_non_null(strstr(js, "\"name\":\"aten::addmm\",\"ts\""));
    assert_non_null(strstr(js, "\"args\":{\"source\":\"torch\",\"op\":true}"));
    assert_non_null(strstr(js, "\"args\":{\"name\":\"pt_worker (999999)\"}"));
    assert_non_null(strstr(js, "\"cat\":\"other\",\"name\":\"mono_span\""));
    assert_null(strstr(js, "too_early"));
    free(js);

    char *sj = summary_json();
    assert_non_null(strstr(sj, "\"imported_events\": 5,"));
    snprintf(key, sizeof key, "\"op\": \"%s\", \"calls\": 1,", OP);  /* not 2: PyTorch's record is the same call */
    assert_non_null(strstr(sj, key));
    const char *p = strstr(sj, "\"op\": \"aten::addmm\", \"calls\": 1,");
    assert_non_null(p);
    assert_non_null(strstr(p, "\"source\": \"torch\""));
    assert_non_null(strstr(sj, "\"op\": \"worker_op\""));
    assert_null(strstr(sj, "\"op\": \"Optimizer.step#SGD.step\""));
    assert_true(strstr(sj, key) < p);  /* opcore's ops come first */
    free(sj);
    char *html = read_file(oc_profiler_output(OC_PROFILE_OUT_HTML), NULL);
    assert_non_null(strstr(html, "<tr class=\"op\" data-op=\"aten::addmm\" data-source=\"torch\">"));
    assert_non_null(strstr(html, ">pt_worker (999999)</div>"));
    free(html);
}

/* A protobuf writer, for an XSpace such as jax.profiler writes. */
typedef struct wb {
    uint8_t b[2048];
    size_t n;
} wb;

static void w_varint(wb *w, uint64_t v)
{
    while (v >= 0x80) {
        w->b[w->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w->b[w->n++] = (uint8_t)v;
}

static void w_int(wb *w, unsigned field, uint64_t v)
{
    w_varint(w, (uint64_t)field << 3);
    w_varint(w, v);
}

static void w_bytes(wb *w, unsigned field, const void *p, size_t n)
{
    w_varint(w, ((uint64_t)field << 3) | 2);
    w_varint(w, n);
    assert_true(w->n + n <= sizeof w->b);
    memcpy(w->b + w->n, p, n);
    w->n += n;
}

static void w_str(wb *w, unsigned field, const char *s) { w_bytes(w, field, s, strlen(s)); }
static void w_sub(wb *w, unsigned field, const wb *sub) { w_bytes(w, field, sub->b, sub->n); }

/* map entry {key; value = {id; name; display_name}} */
static void w_md(wb *w, unsigned field, uint64_t id, const char *name, const char *display)
{
    wb val = {0}, ent = {0};
    w_int(&val, 1, id);
    w_str(&val, 2, name);
    if (display) w_str(&val, 4, display);
    w_int(&ent, 1, id);
    w_sub(&ent, 2, &val);
    w_sub(w, field, &ent);
}

static void test_import_xspace(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "xsp"), OC_OK);
    uint64_t m_a = oc__prof_now();
    int64_t start = oc_profiler_now_ns(OC_PROFILER_CLOCK_REALTIME);
    uint64_t m_b = oc__prof_now();
    oc__prof_host(OC_PROF_BLOCK, "anchor", m_a, m_b);  /* when `start` was read */

    /* Task Environment: profile_start_time = start; /host:CPU: a line
     * 1 us after it; "fusion.1" (an hlo_op) 2..5 us into the line, a Python
     * function displayed as "python fn" 0..1 us */
    wb env = {0}, st = {0}, host = {0}, line = {0}, ev = {0}, ev2 = {0}, stat = {0}, space = {0};
    w_str(&env, 2, "Task Environment");
    w_md(&env, 5, 1, "profile_start_time", NULL);
    w_int(&st, 1, 1);
    w_int(&st, 3, (uint64_t)start);
    w_sub(&env, 6, &st);
    w_int(&stat, 1, 9);
    w_str(&stat, 5, "fusion");
    w_int(&ev, 1, 5);
    w_int(&ev, 2, 2000000);
    w_int(&ev, 3, 3000000);
    w_sub(&ev, 4, &stat);
    w_int(&ev2, 1, 6);
    w_int(&ev2, 2, 0);
    w_int(&ev2, 3, 1000000);
    w_int(&line, 1, 77);
    w_str(&line, 2, "XLA thread");
    w_int(&line, 3, 1000);
    w_sub(&line, 4, &ev);
    w_sub(&line, 4, &ev2);
    w_int(&host, 1, 1);
    w_str(&host, 2, "/host:CPU");
    w_sub(&host, 3, &line);
    w_md(&host, 4, 5, "fusion.1", NULL);
    w_md(&host, 4, 6, "$python_fn", "python fn");
    w_md(&host, 5, 9, "hlo_op", NULL);
    w_sub(&space, 1, &env);
    w_sub(&space, 1, &host);
    w_str(&space, 4, "somehost");
    assert_int_equal(oc_profiler_import_xspace("jax", space.b, space.n), OC_OK);
    sleep_ms(1);
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);

    char *js = trace_json();
    double f_ts, f_dur, a_ts, a_dur;
    ts_dur(js, "\"tid\":77,\"cat\":\"jax\",\"name\":\"fusion.1\"", &f_ts, &f_dur);
    ts_dur(js, "\"name\":\"anchor\"", &a_ts, &a_dur);
    assert_true(f_dur > 2.999 && f_dur < 3.001);
    /* it started 3 us after `start`, which was read during the anchor */
    assert_true(f_ts - 3.0 >= a_ts - 0.5 && f_ts - 3.0 <= a_ts + a_dur + 0.5);
    assert_non_null(strstr(js, "\"cat\":\"jax\",\"name\":\"python fn\""));
    assert_non_null(strstr(js, "\"args\":{\"name\":\"XLA thread (77)\"}"));
    free(js);
    char *sj = read_file(oc_profiler_output(OC_PROFILE_OUT_SUMMARY_JSON), NULL);
    const char *p = strstr(sj, "\"op\": \"fusion.1\", \"calls\": 1,");
    assert_non_null(p);
    assert_non_null(strstr(p, "\"source\": \"jax\""));
    assert_null(strstr(sj, "\"op\": \"python fn\""));
    free(sj);
}

static void test_import_not_xspace(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "xsp"), OC_OK);
    assert_int_equal(oc_profiler_import_xspace("jax", "\xff\xff\xff", 3), OC_EINVAL);
    assert_non_null(strstr(oc_errmsg(), "are not an XSpace"));
    stop_with_nothing_imported();
}

/* many threads append at once (each acts as one core); some exit before stop */
#define NTHREADS 8
#define PER_THREAD 20000

static void *core_thread(void *arg)
{
    uint32_t core = (uint32_t)(uintptr_t)arg;
    char name[32];
    snprintf(name, sizeof name, "op%u", core % 3);  /* a fresh buffer per call: interning by content */
    for (int i = 0; i < PER_THREAD; i++) {
        uint64_t t = oc__prof_now();
        oc_prof_counters k = {64, 64, 0, 0};
        oc__prof_kernel(name, core, NTHREADS, t, t + 10, &k);
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "threads"), OC_OK);
    for (int round = 0; round < 2; round++) {  /* round 2 adopts the exited threads' buffers */
        pthread_t th[NTHREADS];
        for (uintptr_t i = 0; i < NTHREADS; i++) assert_int_equal(pthread_create(&th[i], NULL, core_thread, (void *)i), 0);
        for (int i = 0; i < NTHREADS; i++) pthread_join(th[i], NULL);
    }
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);
    char *sj = summary_json();
    char want[128];
    snprintf(want, sizeof want, "\"events\": %d,", 2 * NTHREADS * PER_THREAD);
    assert_non_null(strstr(sj, want));
    assert_non_null(strstr(sj, "\"dropped_events\": 0,"));
    /* op0 ran on cores 0,3,6: 3 threads x 2 rounds */
    snprintf(want, sizeof want, "\"op\": \"op0\"");
    const char *p = strstr(sj, want);
    assert_non_null(p);
    snprintf(want, sizeof want, "\"kernels\": %d,", 3 * 2 * PER_THREAD);
    assert_non_null(strstr(p, want));
    free(sj);
    /* the next profile starts empty and reuses the buffers */
    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "threads_again"), OC_OK);
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);
    sj = read_file(oc_profiler_output(OC_PROFILE_OUT_SUMMARY_JSON), NULL);
    assert_non_null(strstr(sj, "\"events\": 0,"));
    free(sj);
}

/* Rewrite `key=...` in the bandwidth cache file. */
static void set_key(const char *file, const char *key, const char *value)
{
    char *txt = read_file(file, NULL);
    assert_non_null(txt);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    size_t kl = strlen(key);
    for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, key, kl) && line[kl] == '=') fprintf(f, "%s=%s\n", key, value);
        else fprintf(f, "%s\n", line);
    }
    fclose(f);
    free(txt);
}

static void test_membw_cache(void **state)
{
    (void)state;
    char cache[512], file[600];
    snprintf(cache, sizeof cache, "%s/cache", g_tmp);
    char *saved = getenv("OPCORE_MEMBW_GBPS") ? strdup(getenv("OPCORE_MEMBW_GBPS")) : NULL;
    char *saved_dir = getenv("OPCORE_CACHE_DIR") ? strdup(getenv("OPCORE_CACHE_DIR")) : NULL;
    unsetenv("OPCORE_MEMBW_GBPS");
    unsetenv("OPCORE_CACHE_DIR");
    setenv("XDG_CACHE_HOME", cache, 1);
    setenv("OPCORE_MEMBW_MIB", "8", 1);  /* a small buffer: quick, also under valgrind */
    snprintf(file, sizeof file, "%s/opcore/membw", cache);

    /* measured, cached with what machine it was measured on */
    double bw = oc_profiler_membw_gbps();
    assert_true(bw > 0.1);
    assert_non_null(strstr(oc_profiler_membw_source(), "measured now: memcpy of 8 MiB, best of 9 copies"));
    assert_non_null(strstr(oc_profiler_membw_source(), "because no measurement cached"));
    char *txt = read_file(file, NULL);
    assert_non_null(txt);
    const char *g = strstr(txt, "\ngbps=");
    assert_non_null(g);
    assert_true(strtod(g + 6, NULL) > 0.1);
    for (const char *k = "cpu_model=\0cpus=\0kernel=\0measured_unix=\0threads=\0"; *k; k += strlen(k) + 1)
        assert_non_null(strstr(txt, k));
    free(txt);

    /* the cache is used on the same machine */
    double again = oc_profiler_membw_gbps();
    assert_true(again > bw - 0.001 && again < bw + 0.001);
    assert_non_null(strstr(oc_profiler_membw_source(), "cached: memcpy"));
    set_key(file, "gbps", "77.5");
    assert_true(oc_profiler_membw_gbps() == 77.5);

    /* ... not when the machine changed */
    set_key(file, "cpu_model", "Some Other CPU");
    double m = oc_profiler_membw_gbps();
    assert_true(m > 0.1 && m != 77.5);
    assert_non_null(strstr(oc_profiler_membw_source(), "because the cached one was taken on another machine"));
    txt = read_file(file, NULL);
    assert_null(strstr(txt, "Some Other CPU"));
    free(txt);
    set_key(file, "gbps", "77.5");
    set_key(file, "cpus", "1024");
    assert_true(oc_profiler_membw_gbps() != 77.5);

    /* ... nor when it is stale */
    set_key(file, "gbps", "77.5");
    char old[32];
    snprintf(old, sizeof old, "%lld", (long long)time(NULL) - 31LL * 24 * 3600);
    set_key(file, "measured_unix", old);
    assert_true(oc_profiler_membw_gbps() != 77.5);
    assert_non_null(strstr(oc_profiler_membw_source(), "because the cached one is over 30 days old"));

    /* OPCORE_MEMBW_GBPS wins; a bad one is said so */
    setenv("OPCORE_MEMBW_GBPS", "123.5", 1);
    assert_true(oc_profiler_membw_gbps() == 123.5);
    assert_string_equal(oc_profiler_membw_source(), "set by OPCORE_MEMBW_GBPS");
    setenv("OPCORE_MEMBW_GBPS", "fast", 1);
    assert_true(oc_profiler_membw_gbps() != 123.5);
    assert_non_null(strstr(oc_profiler_membw_source(), "OPCORE_MEMBW_GBPS is not a positive number; cached:"));

    unsetenv("OPCORE_MEMBW_MIB");
    if (saved) setenv("OPCORE_MEMBW_GBPS", saved, 1);
    if (saved_dir) setenv("OPCORE_CACHE_DIR", saved_dir, 1);
    free(saved);
    free(saved_dir);
}

/* the real engine: build the multicore ReLU of examples/relu and profile it */
static void test_real_engine(void **state)
{
    (void)state;
    /* every core runs its share of every call (no straggler takeover, which a
     * loaded machine would trigger): the count of kernel slices below is exact */
    test_use_every_core();
    (void)oc_engine_configure(4, 0);  /* 4 cores even on a 2-CPU machine */
    uint32_t ncores = oc_engine_num_cores();
    char root[4096], compute[4200], shape[4200], out[600];
    snprintf(root, sizeof root, "%s", oc_build_include_dir());
    char *slash = strrchr(root, '/');
    if (slash) *slash = 0;
    snprintf(compute, sizeof compute, "%s/examples/relu/multicore/relu.c", root);
    snprintf(shape, sizeof shape, "%s/examples/relu/shape.c", root);
    if (access(compute, R_OK) != 0 || access(shape, R_OK) != 0) skip();
    snprintf(out, sizeof out, "%s/build", g_tmp);
    const char *cs[] = {compute}, *ss[] = {shape};
    oc_build_options o = {0};
    o.name = "relu_prof";
    o.compute_srcs = cs;
    o.num_compute_srcs = 1;
    o.shape_srcs = ss;
    o.num_shape_srcs = 1;
    o.out_dir = out;
    o.multicore = true;
    oc_build_result r;

    assert_int_equal(oc_profiler_start(g_tmp, OC_PROFILE_TRACE, 0, "engine"), OC_OK);
    if (oc_build(&o, &r) != OC_OK) {
        print_message("cannot build %s: %s\n", compute, oc_errmsg());
        oc_profiler_stop(NULL, 0);
        skip();
    }
    oc_library *lib;
    assert_int_equal(oc_library_load(r.path, &lib), OC_OK);
    const oc_op *op = oc_op_find(OP);
    assert_non_null(op);
    int64_t n = 1 << 16;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 7) - 3;
    oc_tensor t;
    assert_int_equal(oc_tensor_init(&t, x, OC_FLOAT32, 1, &n), OC_OK);
    oc_value arg = oc_value_tensor(&t);
    for (int k = 0; k < 5; k++) {
        assert_int_equal(oc_profiler_step(k), OC_OK);
        assert_int_equal(oc_profiler_begin("fwd"), OC_OK);
        oc_tensor *y = NULL;
        assert_int_equal(oc_op_invoke(op, &arg, 1, &y), OC_OK);
        oc_tensor_free(y);
        assert_int_equal(oc_profiler_end(), OC_OK);
    }
    assert_int_equal(oc_profiler_stop(NULL, 0), OC_OK);
    oc_library_unload(lib);
    free(x);

    char *js = trace_json();
    assert_int_equal(count(js, "\"cat\":\"kernel\""), 5 * ncores);
    for (uint32_t c = 0; c < ncores; c++) {
        char nm[64];
        snprintf(nm, sizeof nm, "\"args\":{\"name\":\"core %u\"}", c);
        assert_non_null(strstr(js, nm));
    }
    assert_int_equal(count(js, "\"cat\":\"call\""), 5);
    assert_int_equal(count(js, "\"cat\":\"shape\""), 5);
    assert_int_equal(count(js, "\"cat\":\"build\""), 1);
    free(js);
    char *sj = summary_json();
    char want[160];
    snprintf(want, sizeof want, "\"op\": \"%s\", \"calls\": 5,", OP);
    const char *p = strstr(sj, want);
    assert_non_null(p);
    snprintf(want, sizeof want, "\"kernels\": %u, \"ncores\": %u,", 5 * ncores, ncores);
    assert_non_null(strstr(p, want));
    snprintf(want, sizeof want, "\"bytes\": %lld,", 5LL * 2 * n * 4);  /* x in, y out */
    assert_non_null(strstr(p, want));
    free(sj);
}

int main(void)
{
    setenv("OPCORE_MEMBW_GBPS", "10", 1);
    setenv("OPCORE_PROFILE_QUIET", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_off_costs_nothing),
        cmocka_unit_test(test_stop_without_start),
        cmocka_unit_test(test_end_without_begin),
        cmocka_unit_test(test_begin_null_name),
        cmocka_unit_test(test_start_unknown_type),
        cmocka_unit_test(test_start_negative_steps),
        cmocka_unit_test(test_start_run_name_with_slash),
        cmocka_unit_test(test_start_unwritable_dir),
        cmocka_unit_test(test_start_while_running),
        cmocka_unit_test(test_trace_run_dir),
        cmocka_unit_test(test_trace_chrome),
        cmocka_unit_test(test_trace_xspace),
        cmocka_unit_test(test_trace_summary_json),
        cmocka_unit_test(test_trace_summary_csv),
        cmocka_unit_test(test_trace_html),
        cmocka_unit_test(test_operator_type),
        cmocka_unit_test(test_ms_duration),
        cmocka_unit_test(test_unique_run_names),
        cmocka_unit_test(test_timestamped_run_name),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_import_without_profile),
        cmocka_unit_test(test_import_span_ending_before_start),
        cmocka_unit_test(test_import_unknown_clock),
        cmocka_unit_test(test_import_empty_source),
        cmocka_unit_test(test_import),
        cmocka_unit_test(test_import_xspace),
        cmocka_unit_test(test_import_not_xspace),
        cmocka_unit_test(test_membw_cache),
        cmocka_unit_test(test_real_engine),
    };
    return oc_test_run("profiler", tests, setup_dir, teardown_dir);
}
