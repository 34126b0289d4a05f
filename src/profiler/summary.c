/* src/profiler/summary.c — the per-operator summary.
 *
 * Per op (the name the runtime passes for its kernels and calls):
 *   calls      CALL spans of that name; without any (operator code called
 *              from elsewhere), the number of kernel launches, a launch
 *              on n cores being n kernel spans, one per core, taken in
 *              time order; its time runs from the first start to the
 *              last end
 *   total, mean, min, max   over those calls
 *   kernel wall   time during which at least one core ran the op's kernel
 *   per core      kernel time on each engine core; balance = max / mean
 *                 over the cores the op used (1.0 = perfectly even)
 *   bytes         bytes_in + bytes_out over all cores; GB/s = bytes /
 *                 kernel wall; and that as a fraction of the memory
 *                 bandwidth of oc_profiler_membw_gbps() (membw.c)
 *
 * Operators imported from another profiler (PyTorch's aten ops) are rows
 * too, with their calls and times and no kernel columns; a span of theirs
 * named like an opcore op (PyTorch's record of the call into opcore) is left
 * out: opcore's own record of that call counts.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "opcore/status.h"
#include "profiler/prof.h"

/* ---- computing the summary ---------------------------------------------- */

typedef struct kspan {
    uint32_t name;
    uint32_t core, ncores;
    uint64_t t0, t1;
} kspan;

static int cmp_kspan(const void *x, const void *y)
{
    const kspan *a = x, *b = y;
    if (a->name != b->name) return a->name < b->name ? -1 : 1;
    if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
    return 0;
}

/* opcore's ops first (by kernel time), then imported ones (by time) */
static int cmp_op(const void *x, const void *y)
{
    const oc__pop *a = x, *b = y;
    if ((a->source == UINT32_MAX) != (b->source == UINT32_MAX)) return a->source == UINT32_MAX ? -1 : 1;
    uint64_t ka = a->kernel_wall_ns ? a->kernel_wall_ns : a->call_ns;
    uint64_t kb = b->kernel_wall_ns ? b->kernel_wall_ns : b->call_ns;
    if (ka != kb) return ka > kb ? -1 : 1;
    return a->name < b->name ? -1 : a->name > b->name;
}

static int cmp_block(const void *x, const void *y)
{
    const oc__pblock *a = x, *b = y;
    if (a->total_ns != b->total_ns) return a->total_ns > b->total_ns ? -1 : 1;
    return a->name < b->name ? -1 : a->name > b->name;
}

static oc__pop *op_for(oc__pdata *d, int32_t *op_of, uint32_t id)
{
    if (op_of[id] < 0) {
        oc__pop *op = &d->ops[d->nops];
        op_of[id] = (int32_t)d->nops++;
        op->name = id;
        op->source = UINT32_MAX;
        op->min_ns = UINT64_MAX;
        op->core_ns = oc__calloc(d->ncores ? d->ncores : 1, sizeof(uint64_t));
    }
    return &d->ops[op_of[id]];
}

void oc__psummary_compute(oc__pdata *d)
{
    uint32_t nn = d->nnames;
    int32_t *op_of = oc__malloc((nn ? nn : 1) * sizeof *op_of);
    int32_t *blk_of = oc__malloc((nn ? nn : 1) * 2 * sizeof *blk_of);
    size_t nk = 0;
    for (uint32_t c = 0; c < d->ncores; c++) nk += d->cores[c].n;
    kspan *ks = oc__malloc((nk ? nk : 1) * sizeof *ks);
    d->ops = oc__calloc(nn ? nn : 1, sizeof *d->ops);
    d->blocks = oc__calloc((nn ? nn : 1) * 2, sizeof *d->blocks);
    if (!op_of || !blk_of || !ks || !d->ops || !d->blocks) goto out;
    for (uint32_t i = 0; i < nn; i++) op_of[i] = -1;
    for (uint32_t i = 0; i < nn * 2; i++) blk_of[i] = -1;

    nk = 0;
    for (uint32_t c = 0; c < d->ncores; c++) {
        const oc__ptrack *t = &d->cores[c];
        for (size_t i = 0; i < t->n; i++) {
            const oc__pev *e = &t->ev[i];
            if (e->name >= nn) continue;
            oc__pop *op = op_for(d, op_of, e->name);
            op->kernels++;
            op->bytes += e->a + e->b;
            op->tcm_bytes += e->c;
            op->stream_bytes += e->d;
            if (op->core_ns) op->core_ns[c] += e->t1 - e->t0;
            if (e->ncores > op->ncores) op->ncores = e->ncores;
            if (c + 1 > op->ncores) op->ncores = c + 1;
            ks[nk].name = e->name;
            ks[nk].t0 = e->t0;
            ks[nk].t1 = e->t1;
            ks[nk].core = c;
            ks[nk].ncores = e->ncores ? e->ncores : 1;
            nk++;
        }
    }
    for (uint32_t h = 0; h < d->nhost; h++)  /* opcore's ops, before imported spans are counted */
        for (size_t i = 0; i < d->host[h].n; i++)
            if (d->host[h].ev[i].kind == OC_PROF_CALL && d->host[h].ev[i].name < nn)
                (void)op_for(d, op_of, d->host[h].ev[i].name);
    uint32_t nopcore = d->nops;
    for (uint32_t h = 0; h < d->nhost; h++) {
        const oc__ptrack *t = &d->host[h];
        for (size_t i = 0; i < t->n; i++) {
            const oc__pev *e = &t->ev[i];
            if (e->name >= nn) continue;
            uint64_t dt = e->t1 - e->t0;
            bool imported_op = e->kind == OC_PROF_EXTERNAL && e->ncores &&
                               (op_of[e->name] < 0 || (uint32_t)op_of[e->name] >= nopcore);
            if (e->kind == OC_PROF_CALL || imported_op) {
                oc__pop *op = op_for(d, op_of, e->name);
                if (imported_op) op->source = (uint32_t)e->b;
                op->calls++;
                op->call_ns += dt;
                if (dt < op->min_ns) op->min_ns = dt;
                if (dt > op->max_ns) op->max_ns = dt;
            } else if (e->kind == OC_PROF_BLOCK || e->kind == OC_PROF_BUILD) {
                uint32_t key = e->name * 2 + (e->kind == OC_PROF_BUILD);
                if (blk_of[key] < 0) {
                    blk_of[key] = (int32_t)d->nblocks;
                    d->blocks[d->nblocks].name = e->name;
                    d->blocks[d->nblocks].kind = e->kind;
                    d->blocks[d->nblocks].min_ns = UINT64_MAX;
                    d->nblocks++;
                }
                oc__pblock *b = &d->blocks[blk_of[key]];
                b->count++;
                b->total_ns += dt;
                if (dt < b->min_ns) b->min_ns = dt;
                if (dt > b->max_ns) b->max_ns = dt;
            }
        }
    }
    /* kernel wall time: union of each op's kernel spans over all cores */
    qsort(ks, nk, sizeof *ks, cmp_kspan);
    for (size_t i = 0; i < nk;) {
        uint32_t name = ks[i].name;
        oc__pop *op = &d->ops[op_of[name]];
        uint64_t lo = ks[i].t0, hi = ks[i].t1, wall = 0;
        size_t j = i;
        for (; j < nk && ks[j].name == name; j++) {
            if (ks[j].t0 > hi) {
                wall += hi - lo;
                lo = ks[j].t0;
                hi = ks[j].t1;
            } else if (ks[j].t1 > hi) {
                hi = ks[j].t1;
            }
        }
        wall += hi - lo;
        op->kernel_wall_ns = wall;
        if (op->calls == 0) {
            /* no CALL spans: count launches. A launch of an op on n cores is
             * n kernel spans, one per core, whose cores need not overlap in
             * time (a tiny kernel ends on one core before another starts):
             * in time order, a span opens a new launch when the current one
             * already has its n spans or already has one on this core. */
            uint64_t launches = 0, smin = UINT64_MAX, smax = 0, sum = 0;
            uint64_t l0 = 0, l1 = 0, seen = 0;
            uint32_t have = 0, want = 0;
            for (size_t k = i; k <= j; k++) {
                bool fresh = k == j || have == 0 || have >= want ||
                             (ks[k].core < 64 && (seen >> ks[k].core) & 1u);
                if (fresh && have) {
                    uint64_t seg = l1 - l0;
                    launches++;
                    sum += seg;
                    if (seg < smin) smin = seg;
                    if (seg > smax) smax = seg;
                }
                if (k == j) break;
                if (fresh) {
                    l0 = ks[k].t0;
                    l1 = ks[k].t1;
                    have = 0;
                    seen = 0;
                    want = ks[k].ncores;
                }
                if (ks[k].t0 < l0) l0 = ks[k].t0;
                if (ks[k].t1 > l1) l1 = ks[k].t1;
                if (ks[k].core < 64) seen |= (uint64_t)1 << ks[k].core;
                have++;
            }
            op->calls = launches;
            op->call_ns = sum;
            op->min_ns = smin;
            op->max_ns = smax;
        }
        i = j;
    }
    for (uint32_t i = 0; i < d->nops; i++) {
        oc__pop *op = &d->ops[i];
        if (op->min_ns == UINT64_MAX) op->min_ns = 0;
        uint32_t n = op->ncores ? op->ncores : 1;
        if (n > d->ncores) n = d->ncores;
        uint64_t mx = 0, sum = 0;
        for (uint32_t c = 0; op->core_ns && c < n; c++) {
            sum += op->core_ns[c];
            if (op->core_ns[c] > mx) mx = op->core_ns[c];
        }
        op->balance = sum ? (double)mx / ((double)sum / n) : 0;
        op->gbps = op->kernel_wall_ns ? (double)op->bytes / (double)op->kernel_wall_ns : 0;
        op->membw_frac = d->membw_gbps > 0 ? op->gbps / d->membw_gbps : 0;
    }
    for (uint32_t i = 0; i < d->nblocks; i++)
        if (d->blocks[i].min_ns == UINT64_MAX) d->blocks[i].min_ns = 0;
    qsort(d->ops, d->nops, sizeof *d->ops, cmp_op);
    qsort(d->blocks, d->nblocks, sizeof *d->blocks, cmp_block);
out:
    oc__free(op_of);
    oc__free(blk_of);
    oc__free(ks);
}

/* ---- writing it ------------------------------------------------------------ */

const char *oc__pop_source(const oc__pdata *d, const oc__pop *op)
{
    return op->source == UINT32_MAX ? "opcore" : oc__pname(d, op->source);
}

static double ms(uint64_t ns) { return (double)ns / 1e6; }
static double us(uint64_t ns) { return (double)ns / 1e3; }

static void csv_field(oc__pw *s, const char *str)
{
    if (strpbrk(str, ",\"\n\r")) {
        oc__pw_put(s, "\"", 1);
        for (const char *p = str; *p; p++) {
            if (*p == '"') oc__pw_put(s, "\"", 1);
            oc__pw_put(s, p, 1);
        }
        oc__pw_put(s, "\"", 1);
    } else {
        oc__pw_puts(s, str);
    }
}

static oc_status write_file(const char *path, const oc__pw *s)
{
    FILE *f = fopen(path, "w");
    bool bad = !f || s->failed || s->buf.oom || fwrite(s->buf.s, 1, s->buf.len, f) != s->buf.len;
    if (f && fclose(f) != 0) bad = true;
    if (bad) return oc_set_error(OC_EIO, "oc_profiler_stop: writing '%s' failed", path);
    return OC_OK;
}

oc_status oc__pexport_summary(const oc__pdata *d, const char *json_path, const char *csv_path)
{
    oc__pw j = {0};
    oc__pw_puts(&j, "{\n  \"run\": ");
    oc__pw_json_str(&j, d->run);
    oc__pw_puts(&j, ",\n  \"host\": ");
    oc__pw_json_str(&j, d->hostname);
    oc__pw_printf(&j, ",\n  \"profile_type\": \"%s\",\n  \"duration_ms\": %.6f,\n  \"ms_duration\": %g,\n"
                  "  \"engine_cores\": %u,\n  \"membw_gbps\": %.3f,\n  \"membw_source\": ",
                  d->type == OC_PROFILE_OPERATOR ? "operator" : "trace", ms(d->end_ns - d->start_ns),
                  d->ms_duration, d->ncores, d->membw_gbps);
    oc__pw_json_str(&j, d->membw_how);
    oc__pw_printf(&j, ",\n  \"events\": %llu,\n  \"imported_events\": %llu,\n"
                  "  \"dropped_events\": %llu,\n  \"steps\": %zu,\n  \"ops\": [",
                  (unsigned long long)d->total_events, (unsigned long long)d->imported,
                  (unsigned long long)d->dropped, d->steps.n);
    for (uint32_t i = 0; i < d->nops; i++) {
        const oc__pop *op = &d->ops[i];
        oc__pw_puts(&j, i ? ",\n    {\"op\": " : "\n    {\"op\": ");
        oc__pw_json_str(&j, oc__pname(d, op->name));
        oc__pw_printf(&j, ", \"calls\": %llu, \"total_ms\": %.6f, \"mean_us\": %.3f, \"min_us\": %.3f, "
                      "\"max_us\": %.3f, \"kernel_wall_ms\": %.6f, \"kernels\": %llu, \"ncores\": %u, "
                      "\"core_ms\": [",
                      (unsigned long long)op->calls, ms(op->call_ns),
                      op->calls ? us(op->call_ns) / (double)op->calls : 0.0, us(op->min_ns), us(op->max_ns),
                      ms(op->kernel_wall_ns), (unsigned long long)op->kernels, op->ncores);
        for (uint32_t c = 0; c < d->ncores; c++)
            oc__pw_printf(&j, "%s%.6f", c ? ", " : "", op->core_ns ? ms(op->core_ns[c]) : 0.0);
        oc__pw_printf(&j, "], \"balance\": %.4f, \"bytes\": %llu, \"tcm_bytes\": %llu, \"stream_bytes\": %llu, "
                      "\"gbps\": %.4f, \"membw_fraction\": %.6f, \"source\": ",
                      op->balance, (unsigned long long)op->bytes, (unsigned long long)op->tcm_bytes,
                      (unsigned long long)op->stream_bytes, op->gbps, op->membw_frac);
        oc__pw_json_str(&j, oc__pop_source(d, op));
        oc__pw_puts(&j, "}");
    }
    oc__pw_puts(&j, d->nops ? "\n  ],\n  \"blocks\": [" : "],\n  \"blocks\": [");
    for (uint32_t i = 0; i < d->nblocks; i++) {
        const oc__pblock *b = &d->blocks[i];
        oc__pw_puts(&j, i ? ",\n    {\"name\": " : "\n    {\"name\": ");
        oc__pw_json_str(&j, oc__pname(d, b->name));
        oc__pw_printf(&j, ", \"kind\": \"%s\", \"count\": %llu, \"total_ms\": %.6f, \"mean_us\": %.3f, "
                      "\"min_us\": %.3f, \"max_us\": %.3f}", oc__pkind_name(b->kind),
                      (unsigned long long)b->count, ms(b->total_ns),
                      b->count ? us(b->total_ns) / (double)b->count : 0.0, us(b->min_ns), us(b->max_ns));
    }
    oc__pw_puts(&j, d->nblocks ? "\n  ]\n}\n" : "]\n}\n");
    oc_status st = write_file(json_path, &j);
    oc__pw_free(&j);

    oc__pw c = {0};
    oc__pw_puts(&c, "op,calls,total_ms,mean_us,min_us,max_us,kernel_wall_ms,kernels,ncores,balance,bytes,"
                    "tcm_bytes,stream_bytes,gbps,membw_fraction,source");
    for (uint32_t k = 0; k < d->ncores; k++) oc__pw_printf(&c, ",core%u_ms", k);
    oc__pw_puts(&c, "\n");
    for (uint32_t i = 0; i < d->nops; i++) {
        const oc__pop *op = &d->ops[i];
        csv_field(&c, oc__pname(d, op->name));
        oc__pw_printf(&c, ",%llu,%.6f,%.3f,%.3f,%.3f,%.6f,%llu,%u,%.4f,%llu,%llu,%llu,%.4f,%.6f",
                      (unsigned long long)op->calls, ms(op->call_ns),
                      op->calls ? us(op->call_ns) / (double)op->calls : 0.0, us(op->min_ns), us(op->max_ns),
                      ms(op->kernel_wall_ns), (unsigned long long)op->kernels, op->ncores, op->balance,
                      (unsigned long long)op->bytes, (unsigned long long)op->tcm_bytes,
                      (unsigned long long)op->stream_bytes, op->gbps, op->membw_frac);
        oc__pw_puts(&c, ",");
        csv_field(&c, oc__pop_source(d, op));
        for (uint32_t k = 0; k < d->ncores; k++) oc__pw_printf(&c, ",%.6f", op->core_ns ? ms(op->core_ns[k]) : 0.0);
        oc__pw_puts(&c, "\n");
    }
    oc_status st2 = write_file(csv_path, &c);
    oc__pw_free(&c);
    return st != OC_OK ? st : st2;
}

#define PRINT_MAX_IMPORTED 25

void oc__psummary_print(const oc__pdata *d, FILE *out)
{
    fprintf(out, "\nopcore profile '%s' (%s): %.3f ms, %u engine cores\n", d->run,
            d->type == OC_PROFILE_OPERATOR ? "operator" : "trace", ms(d->end_ns - d->start_ns), d->ncores);
    fprintf(out, "memory bandwidth %.1f GB/s: %s\n", d->membw_gbps, d->membw_how);
    if (d->dropped) fprintf(out, "warning: %llu events dropped (OPCORE_PROFILE_MAX_EVENTS)\n",
                            (unsigned long long)d->dropped);
    uint32_t nown = 0, nimp = 0;
    for (uint32_t i = 0; i < d->nops; i++) {
        if (d->ops[i].source == UINT32_MAX) nown++;
        else nimp++;
    }
    if (!nown) {
        fprintf(out, "no opcore ops ran\n");
    } else {
        fprintf(out, "%-32s %7s %10s %10s %10s %10s %10s %5s %7s %10s %8s %6s\n", "op", "calls", "total ms",
                "mean us", "min us", "max us", "kernel ms", "cores", "balance", "MB moved", "GB/s", "% bw");
        for (uint32_t i = 0; i < d->nops; i++) {
            const oc__pop *op = &d->ops[i];
            if (op->source != UINT32_MAX) continue;
            fprintf(out, "%-32.32s %7llu %10.3f %10.2f %10.2f %10.2f %10.3f %5u %7.2f %10.2f %8.2f %6.1f\n",
                    oc__pname(d, op->name), (unsigned long long)op->calls, ms(op->call_ns),
                    op->calls ? us(op->call_ns) / (double)op->calls : 0.0, us(op->min_ns), us(op->max_ns),
                    ms(op->kernel_wall_ns), op->ncores, op->balance, (double)op->bytes / 1e6, op->gbps,
                    op->membw_frac * 100);
        }
        if (d->ncores > 1 && d->ncores <= 16) {
            fprintf(out, "kernel time per core (ms):\n%-32s", "op");
            for (uint32_t c = 0; c < d->ncores; c++) fprintf(out, " %8s%-2u", "core ", c);
            fprintf(out, "\n");
            for (uint32_t i = 0; i < d->nops; i++) {
                const oc__pop *op = &d->ops[i];
                if (!op->kernels) continue;
                fprintf(out, "%-32.32s", oc__pname(d, op->name));
                for (uint32_t c = 0; c < d->ncores; c++) fprintf(out, " %10.3f", op->core_ns ? ms(op->core_ns[c]) : 0.0);
                fprintf(out, "\n");
            }
        }
    }
    if (nimp) {
        fprintf(out, "%-60s %7s %10s %10s %10s %10s\n", "imported op", "calls", "total ms", "mean us", "min us",
                "max us");
        uint32_t shown = 0;
        for (uint32_t i = 0; i < d->nops && shown < PRINT_MAX_IMPORTED; i++) {
            const oc__pop *op = &d->ops[i];
            if (op->source == UINT32_MAX) continue;
            char nm[64];
            snprintf(nm, sizeof nm, "%s: %s", oc__pname(d, op->source), oc__pname(d, op->name));
            fprintf(out, "%-60.60s %7llu %10.3f %10.2f %10.2f %10.2f\n", nm, (unsigned long long)op->calls,
                    ms(op->call_ns), op->calls ? us(op->call_ns) / (double)op->calls : 0.0, us(op->min_ns),
                    us(op->max_ns));
            shown++;
        }
        if (nimp > shown) fprintf(out, "... and %u more imported ops (RUN.summary.json has all)\n", nimp - shown);
    }
    if (d->nblocks) {
        fprintf(out, "%-32s %7s %10s %10s %10s %10s\n", "block", "count", "total ms", "mean us", "min us", "max us");
        for (uint32_t i = 0; i < d->nblocks; i++) {
            const oc__pblock *b = &d->blocks[i];
            char nm[64];
            snprintf(nm, sizeof nm, "%s%.40s", b->kind == OC_PROF_BUILD ? "build: " : "", oc__pname(d, b->name));
            fprintf(out, "%-32.32s %7llu %10.3f %10.2f %10.2f %10.2f\n", nm, (unsigned long long)b->count,
                    ms(b->total_ns), b->count ? us(b->total_ns) / (double)b->count : 0.0, us(b->min_ns),
                    us(b->max_ns));
        }
    }
    if (d->steps.n) fprintf(out, "steps: %zu\n", d->steps.n);
    fflush(out);
}
