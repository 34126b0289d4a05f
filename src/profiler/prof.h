/* src/profiler/prof.h — profiler internals shared by its files (not public).
 *
 * Recording (record.c): each thread that records owns an oc__pbuf, a list of
 * fixed chunks of events it appends to without locks; the buffer is put on
 * a global list (under a mutex) once, at the thread's first event. The
 * count of events is published with a release store; oc_profiler_stop()
 * (session.c) stops recording, then reads every buffer up to its count.
 *
 * Calls within go one way: session.c (start/stop) -> exporters, import.c,
 * membw.c -> record.c (the store), util.c; nothing calls session.c.
 *
 * Export (trace.c, xplane.c, summary.c, report.c) works on an oc__pdata: a
 * snapshot of one stopped profile, with events sorted per track.
 */
#ifndef OPCORE_PROFILER_PROF_H
#define OPCORE_PROFILER_PROF_H

#include "core/strbuf.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "opcore/profiler.h"
#include "profiler/hooks.h"

/* One recorded event (64 bytes). */
typedef struct oc__pev {
    uint64_t t0, t1;        /* ns, CLOCK_MONOTONIC; t1 == t0 for instants */
    uint64_t a, b, c, d;    /* kernel: bytes_in, bytes_out, tcm, stream; step: number;
                             * external: category id + 1 (0: none), source id */
    uint32_t name;          /* interned name id */
    uint32_t core;          /* kernel: engine core */
    uint32_t ncores;        /* kernel: cores running the op; external: 1 if an operator */
    uint8_t kind;           /* oc_prof_kind */
    uint8_t pad[3];
    uint64_t program;       /* kernel of a grid launch: oc__prof_program's packing; 0: none */
} oc__pev;

/* ---- snapshot of a stopped profile ----------------------------------- */

typedef struct oc__ptrack {
    char name[64];      /* "core 3", "main (1234)", "steps" */
    int64_t tid;        /* OS thread id (host), core index (engine) */
    int sort;           /* order among tracks of its group */
    oc__pev *ev;        /* sorted by t0, then longest first */
    size_t n;
} oc__ptrack;

typedef struct oc__pop {
    uint32_t name;          /* interned op name */
    uint32_t source;        /* UINT32_MAX: an opcore op; else the profiler it came from */
    uint64_t calls;         /* CALL spans, or kernel launches if none */
    uint64_t call_ns;       /* sum of CALL spans (or kernel wall time) */
    uint64_t min_ns, max_ns;
    uint64_t kernel_wall_ns; /* time any core ran this op (union of spans) */
    uint64_t bytes;         /* bytes_in + bytes_out over all cores */
    uint64_t tcm_bytes, stream_bytes;
    uint64_t kernels;       /* kernel spans (core executions) */
    uint32_t ncores;        /* most cores one launch used */
    uint64_t *core_ns;      /* [ncores_total] kernel time per core */
    double balance;         /* max/mean over the op's cores */
    double gbps;            /* bytes / kernel_wall */
    double membw_frac;      /* gbps / machine bandwidth */
} oc__pop;

typedef struct oc__pblock {
    uint32_t name;
    uint32_t kind;          /* OC_PROF_BLOCK or OC_PROF_BUILD */
    uint64_t count, total_ns, min_ns, max_ns;
} oc__pblock;

typedef struct oc__pdata {
    /* session */
    char logdir[2048];
    char run[256];
    char hostname[256];
    oc_profile_type type;
    double ms_duration;
    uint64_t start_ns, end_ns;  /* monotonic */
    int64_t real_offset_ns;     /* realtime - monotonic at start */
    uint64_t dropped;           /* events lost (per-thread cap) */
    /* names (index = id) */
    char **names;
    uint32_t nnames;
    /* tracks */
    oc__ptrack *cores;  uint32_t ncores;   /* engine core i = cores[i] */
    oc__ptrack *host;   uint32_t nhost;    /* host threads, in order of first event */
    oc__ptrack steps;                      /* step spans (derived from markers) */
    /* summary */
    oc__pop *ops;       uint32_t nops;     /* sorted by kernel wall time, descending */
    oc__pblock *blocks; uint32_t nblocks;
    double membw_gbps;
    char membw_how[512];    /* how membw_gbps was obtained (oc_profiler_membw_source) */
    uint64_t total_events;
    uint64_t imported;      /* of which imported from other profilers */
} oc__pdata;

const char *oc__pname(const oc__pdata *d, uint32_t id);
const char *oc__pkind_name(unsigned kind);
/* The category an event is filed under in the Chrome trace: its kind, or
 * for an imported span the category its profiler gave it. */
const char *oc__pcat(const oc__pdata *d, const oc__pev *e);
/* The name id of an imported span's category: the one its profiler gave
 * it, else its profiler's name. */
static inline uint32_t oc__pext_cat(const oc__pev *e)
{
    return (uint32_t)(e->a ? e->a - 1 : e->b);
}
/* True for the op-level events: kernels, op calls, imported operators. */
static inline bool oc__pis_op(const oc__pev *e)
{
    return e->kind == OC_PROF_KERNEL || e->kind == OC_PROF_CALL || (e->kind == OC_PROF_EXTERNAL && e->ncores);
}

/* Clip `e` to the profile's window; false if it lies outside (util.c). */
bool oc__pkeep(const oc__pdata *d, oc__pev *e);

/* ---- the event store (record.c) ------------------------------------------
 * Used by import.c and driven by the session (session.c); it calls neither. */

/* Intern `s` in the global name table: its id, or UINT32_MAX on OOM. */
uint32_t oc__pintern(const char *s);
/* The running profile's generation and realtime - monotonic offset (ns);
 * false when no profile runs. */
bool oc__psession(unsigned *gen, int64_t *real_offset_ns);
/* A new profile's generation number (then oc__pstore_start records it). */
unsigned oc__pstore_new_gen(void);
/* Record the kinds in `kind_mask` (bit per oc_prof_kind) until `deadline`
 * (ns; UINT64_MAX: none), at most `max_events` per thread (0: unchanged);
 * oc__psession reports `real_offset_ns`. */
void oc__pstore_start(unsigned kind_mask, uint64_t deadline, size_t max_events, int64_t real_offset_ns);
/* Stop recording; the profile's end: `now`, or its deadline if earlier. */
uint64_t oc__pstore_stop(uint64_t now);
/* Copy generation `gen`'s events within [d->start_ns, d->end_ns] onto the
 * tracks of `d` (core, host and step tracks; unsorted). False on OOM. */
bool oc__psnapshot(oc__pdata *d, unsigned gen);

/* ---- imported spans (import.c) ------------------------------------------ */

/* Forget the spans imported into earlier profiles (at oc_profiler_start). */
void oc__pimport_reset(unsigned gen);
/* Put the spans imported into profile `gen` on the host tracks of `d` (the
 * thread with the same OS id, else a new track). False on OOM. */
bool oc__pimport_merge(oc__pdata *d, unsigned gen);

/* The array `p` of capacity *cap (elements of `elem` bytes) with room for
 * `need`: `p` itself, or grown (doubling, from `first`): the new pointer;
 * NULL on OOM (`p` is kept). */
void *oc__pgrow(void *p, size_t *cap, size_t need, size_t elem, size_t first);

/* ---- protobuf wire format: reading (xspace_read.c) ------------------------ */

/* A protobuf message (or what is left of it). */
typedef struct oc__pbr {
    const uint8_t *p, *end;
} oc__pbr;

enum { OC__PB_VARINT = 0, OC__PB_I64 = 1, OC__PB_LEN = 2, OC__PB_I32 = 5 };

/* The next field of `b`: its number, wire type and value (a varint or I64;
 * a LEN field's length, its bytes in *sub; sub->p is NULL for the others).
 * False at the end of `b`, or on malformed input (*bad set). */
bool oc__pb_next(oc__pbr *b, unsigned *field, unsigned *wt, uint64_t *v, oc__pbr *sub, bool *bad);

/* growable byte buffer; with `gz` set it flushes to it when large */
typedef struct oc__pw {
    oc__sb buf;    /* pending text (all of it when writing to memory) */
    void *gz;      /* gzFile or NULL */
    FILE *f;       /* FILE or NULL */
    bool failed;
} oc__pw;

void oc__pw_put(oc__pw *s, const void *p, size_t n);
void oc__pw_puts(oc__pw *s, const char *str);
void oc__pw_printf(oc__pw *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void oc__pw_json_str(oc__pw *s, const char *str);   /* quoted, escaped */
void oc__pw_json_str_html(oc__pw *s, const char *str); /* same, and '<' too: for JSON in <script> */
void oc__pw_html(oc__pw *s, const char *str);       /* HTML-escaped */
void oc__pw_flush(oc__pw *s);
void oc__pw_free(oc__pw *s);

/* exporters: return OC_OK or set the error and return OC_EIO */
oc_status oc__pexport_trace(const oc__pdata *d, const char *path);
oc_status oc__pexport_xplane(const oc__pdata *d, const char *path);
void oc__psummary_compute(oc__pdata *d);  /* before the exporters: they read d->ops */
oc_status oc__pexport_summary(const oc__pdata *d, const char *json_path, const char *csv_path);
void oc__psummary_print(const oc__pdata *d, FILE *out);
const char *oc__pop_source(const oc__pdata *d, const oc__pop *op); /* "opcore", "torch" */
oc_status oc__pexport_html(const oc__pdata *d, const char *path);

/* Kernels overlapping on one core (two host threads acting as core 0 at
 * once) are split into lanes so that each drawn track nests: lane of each
 * event of `t` (malloc'd), and the number of lanes used. NULL on OOM. */
#define OC__PMAX_LANES 16
uint8_t *oc__plane_assign(const oc__ptrack *t, int *nlanes);

/* make a directory and its parents; 0 or -1 (errno) (util.c) */
int oc__mkdirs(const char *path);

#endif /* OPCORE_PROFILER_PROF_H */
