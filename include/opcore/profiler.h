/* opcore/profiler.h — the profiler: what every core did, and when.
 *
 *     oc_profiler_start("logs", OC_PROFILE_TRACE, 0, NULL);
 *     for (int64_t step = 0; step < 10; step++) {
 *         oc_profiler_step(step);
 *         oc_profiler_begin("forward");
 *         ... call ops ...
 *         oc_profiler_end();
 *     }
 *     char run_dir[4096];
 *     oc_profiler_stop(run_dir, sizeof run_dir);
 *
 * While a profile runs, the engine records one span per kernel per core
 * (op, core, bytes in and out, TCM and stream bytes) and the host records
 * its spans (op calls and their phases, builds, named blocks, step
 * markers). oc_profiler_stop() writes, for a run named RUN:
 *
 *     LOGDIR/RUN.trace.json.gz      Chrome trace-event JSON (gzip): open in
 *                                   https://ui.perfetto.dev or chrome://tracing
 *     LOGDIR/plugins/profile/RUN/HOST.xplane.pb
 *                                   XSpace for TensorBoard's profile plugin
 *                                   (`tensorboard --logdir LOGDIR`, xprof)
 *     LOGDIR/RUN.summary.json       per-operator summary (also printed as a
 *     LOGDIR/RUN.summary.csv        table on stdout unless OPCORE_PROFILE_QUIET
 *                                   is set to a non-empty value other than 0)
 *     LOGDIR/RUN.report.html        self-contained HTML report: a timeline per
 *                                   core and the summary table (no network)
 *
 * When no profile runs, the runtime pays one relaxed atomic load per event.
 * While one runs, each thread appends to its own buffer without locks; no
 * memory is allocated per event once the buffers have grown.
 *
 * All calls are thread-safe. One profile runs at a time per process.
 */
#ifndef OPCORE_PROFILER_H
#define OPCORE_PROFILER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#include "export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a profile records.
 *
 * OC_PROFILE_TRACE records everything: kernels on every core, op calls
 * and their phases (shape inference, output allocation, dispatch, waiting
 * for the cores), library builds, named blocks and step markers.
 *
 * OC_PROFILE_OPERATOR records what the operator summary needs and what
 * the user asked for: kernels on every core, whole op calls, builds,
 * named blocks and step markers; it leaves out the phases inside a call,
 * which makes it cheaper for ops with very short kernels. */
typedef enum oc_profile_type {
    OC_PROFILE_TRACE = 0,
    OC_PROFILE_OPERATOR = 1
} oc_profile_type;

/* The files a stopped profile wrote (see oc_profiler_output). */
typedef enum oc_profile_output {
    OC_PROFILE_OUT_RUN_DIR = 0,  /* LOGDIR/plugins/profile/RUN (a folder) */
    OC_PROFILE_OUT_TRACE = 1,    /* LOGDIR/RUN.trace.json.gz */
    OC_PROFILE_OUT_XPLANE = 2,   /* LOGDIR/plugins/profile/RUN/HOST.xplane.pb */
    OC_PROFILE_OUT_SUMMARY_JSON = 3, /* LOGDIR/RUN.summary.json */
    OC_PROFILE_OUT_SUMMARY_CSV = 4,  /* LOGDIR/RUN.summary.csv */
    OC_PROFILE_OUT_HTML = 5,     /* LOGDIR/RUN.report.html */
    OC_PROFILE_OUT_LOGDIR = 6,   /* LOGDIR as given to oc_profiler_start */
    OC_PROFILE_OUT_RUN_NAME = 7  /* RUN */
} oc_profile_output;

/* Start a profile. Output goes under `logdir` (created with its parents if
 * missing; NULL means "logs"). `type` is OC_PROFILE_TRACE or
 * OC_PROFILE_OPERATOR. `ms_duration` > 0 records only the first
 * `ms_duration` milliseconds (events that begin later are dropped; the
 * profile still ends at oc_profiler_stop); 0 records until the stop.
 * `run_name` names the run (letters, digits, '.', '_', '-'; NULL or ""
 * means a timestamp such as 2025_01_31_12_00_00; a suffix _1, _2, ... is
 * added if that run already exists in `logdir`).
 *
 * Returns OC_OK; OC_EEXIST if a profile is already running; OC_EINVAL for
 * a bad type, duration or run name; OC_EIO if `logdir` cannot be created. */
OC_API oc_status oc_profiler_start(const char *logdir, oc_profile_type type, double ms_duration,
                                   const char *run_name);

/* Stop the running profile and write its files (see the top of this
 * header). If `run_dir_out` is not NULL, the run folder
 * LOGDIR/plugins/profile/RUN is copied there (truncated to `len` bytes,
 * always NUL-terminated when len > 0). Prints the operator summary table
 * on stdout unless OPCORE_PROFILE_QUIET is set.
 *
 * The first stop on a machine measures its memory bandwidth (about a
 * quarter of a second) and caches it in <cache>/membw, where <cache> is
 * $OPCORE_CACHE_DIR, else $XDG_CACHE_HOME/opcore, else ~/.cache/opcore;
 * OPCORE_MEMBW_GBPS overrides it.
 *
 * Returns OC_OK; OC_EINVAL if no profile is running; OC_EIO if a file
 * could not be written (the profile is stopped all the same). */
OC_API oc_status oc_profiler_stop(char *run_dir_out, size_t len);

/* A path or name of the last profile stopped in this process, or NULL if
 * none has stopped yet. The string stays valid until the next
 * oc_profiler_stop(). */
OC_API const char *oc_profiler_output(oc_profile_output what);

/* Open a named block on the calling thread: it shows as a span on the
 * thread's track from now until the matching oc_profiler_end(). Blocks
 * nest (up to 256 deep per thread). A block is recorded if it begins while
 * a profile is recording. Cheap when no profile runs.
 * Returns OC_OK; OC_EINVAL if `name` is NULL or blocks nest too deep. */
OC_API oc_status oc_profiler_begin(const char *name);

/* Close the innermost block opened on the calling thread.
 * Returns OC_OK; OC_EINVAL if the thread has no open block. */
OC_API oc_status oc_profiler_end(void);

/* Mark the start of training (or serving) step `step`. A step lasts until
 * the next step marker or the end of the profile; it shows as an instant
 * marker on the calling thread, as a span "step N" on the "steps" track,
 * and as the "Steps" line of the host plane in TensorBoard. Returns OC_OK. */
OC_API oc_status oc_profiler_step(int64_t step);

/* True while a profile is recording (false before start, after stop, and
 * once ms_duration has run out). */
OC_API bool oc_profiler_enabled(void);

/* The machine's memory bandwidth in GB/s (10^9 bytes per second) used by
 * the summary: OPCORE_MEMBW_GBPS if set, else the cached measurement if it
 * was taken on this machine (same CPU model, CPU count and kernel) less than
 * 30 days ago, else measured now and cached: memcpy of a 128 MiB buffer on
 * one CPU and on all CPUs, several tries each, the best (about half a
 * second). */
OC_API double oc_profiler_membw_gbps(void);

/* How the bandwidth of oc_profiler_membw_gbps() was obtained, in words:
 * "OPCORE_MEMBW_GBPS", or the measurement (method, machine, date) and where
 * it is cached. Valid until the next call of either function. */
OC_API const char *oc_profiler_membw_source(void);

/* ---- spans from other profilers -------------------------------------------- */

/* The clock of imported timestamps. */
typedef enum oc_profiler_clock {
    OC_PROFILER_CLOCK_MONOTONIC = 0, /* CLOCK_MONOTONIC ns: opcore's own clock */
    OC_PROFILER_CLOCK_REALTIME = 1   /* CLOCK_REALTIME ns since 1970 (PyTorch's and JAX's profilers) */
} oc_profiler_clock;

/* One span recorded by another profiler, e.g. a PyTorch operator. */
typedef struct oc_profiler_span {
    const char *name;     /* what ran, e.g. "aten::addmm" */
    const char *category; /* its category there, e.g. "cpu_op" (the Chrome trace's "cat"); NULL: none */
    const char *thread;   /* name of its thread, for a thread opcore saw nothing on; NULL: "thread" */
    int64_t tid;          /* OS thread id: the span joins the track of that thread */
    int64_t t0_ns, t1_ns; /* start and end on the clock passed to oc_profiler_import */
    bool op;              /* an operator: a row of the summary and of xprof's op tables */
} oc_profiler_span;

/* Add `n` spans recorded by another profiler (`source`: "torch", "jax") to
 * the running profile: they show beside opcore's events, on one clock, in
 * every output. A span goes on the track of the host thread with OS id
 * `tid` (so a PyTorch operator and the opcore op call it made nest on one
 * track), or on a track of its own for a thread opcore saw nothing on.
 * Spans outside the profile (or after its ms_duration) are dropped or
 * clipped like opcore's own. The strings are copied.
 * Returns OC_OK; OC_EINVAL if no profile is running or a span has no name
 * or ends before it starts (nothing is imported then); OC_ENOMEM. */
OC_API oc_status oc_profiler_import(const char *source, oc_profiler_clock clock, const oc_profiler_span *spans,
                                    size_t n);

/* Import the host-thread spans of an XSpace (the bytes of an .xplane.pb,
 * such as jax.profiler writes): every event of its "/host:CPU" plane, on a
 * track per line, at the absolute time the XSpace gives it (its line
 * timestamps plus the profile start time of its "Task Environment" plane,
 * if any). Events carrying an "hlo_op" or "tf_op" stat count as operators.
 * Returns what oc_profiler_import returns, or OC_EINVAL if the bytes are
 * not an XSpace. */
OC_API oc_status oc_profiler_import_xspace(const char *source, const void *data, size_t len);

/* Now on opcore's clock (CLOCK_MONOTONIC ns), and on `clock`. */
OC_API int64_t oc_profiler_now_ns(oc_profiler_clock clock);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_PROFILER_H */
