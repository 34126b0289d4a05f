/* src/profiler/report.c — a self-contained HTML report: a timeline (one row
 * per engine core, the steps and each host thread; an inline SVG) and the
 * operator summary table. Inline CSS and a few lines of inline JS (zoom with
 * the wheel, pan by dragging, hover for details); no network.
 *
 * To bound the file size, spans narrower than a quarter of a pixel at full
 * zoom-out that follow each other on the same row and level are merged
 * into one rect ("N spans").
 */
#include <stdlib.h>
#include <string.h>

#include "opcore/status.h"
#include "profiler/prof.h"

#define TL_W 1600.0   /* SVG units across the whole profile */
#define ROW_H 16      /* px per nesting level */
#define RES 0.25      /* merge spans narrower than this (SVG units) */

static unsigned hue_of(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h % 360;
}

static const char *CSS =
    "body{font:13px/1.4 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:16px;color:#222}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:20px 0 6px}.meta{color:#555}"
    "#tl{display:flex;border:1px solid #ccc;user-select:none}#labels{flex:none;width:170px;background:#f7f7f7;"
    "border-right:1px solid #ccc}#labels div{box-sizing:border-box;padding:0 6px;white-space:nowrap;overflow:hidden;"
    "text-overflow:ellipsis;border-bottom:1px solid #e4e4e4;font-size:12px}#plot{flex:1;overflow:hidden;cursor:grab}"
    "#plot svg{display:block;width:100%}rect.e{stroke:#0003;stroke-width:1;vector-effect:non-scaling-stroke}"
    "rect.e:hover{stroke:#000}#tip{position:fixed;pointer-events:none;background:#222;color:#fff;padding:3px 6px;"
    "border-radius:3px;font-size:12px;display:none;white-space:pre}"
    "table{border-collapse:collapse;margin-top:4px}th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}"
    "th{background:#f0f0f0}td.l,th.l{text-align:left}.sw{display:inline-block;width:10px;height:10px;"
    "margin-right:5px;border:1px solid #0003}.legend span{margin-right:14px;white-space:nowrap}"
    ".hint{color:#777;font-size:12px}";

static const char *JS =
    "(function(){var svg=document.getElementById('svg'),plot=document.getElementById('plot'),"
    "tip=document.getElementById('tip'),W=+svg.dataset.w,H=+svg.dataset.h,x0=0,w=W,drag=null;"
    "function set(){if(w>W)w=W;if(w<W/1e6)w=W/1e6;if(x0<0)x0=0;if(x0+w>W)x0=W-w;"
    "svg.setAttribute('viewBox',x0+' 0 '+w+' '+H);}"
    "plot.addEventListener('wheel',function(ev){ev.preventDefault();var r=plot.getBoundingClientRect(),"
    "f=(ev.clientX-r.left)/r.width,c=x0+f*w,k=ev.deltaY<0?0.8:1.25;w*=k;x0=c-f*w;set();},{passive:false});"
    "plot.addEventListener('mousedown',function(ev){drag={x:ev.clientX,x0:x0};});"
    "window.addEventListener('mouseup',function(){drag=null;});"
    "window.addEventListener('mousemove',function(ev){if(drag){var r=plot.getBoundingClientRect();"
    "x0=drag.x0-(ev.clientX-drag.x)/r.width*w;set();}});"
    "svg.addEventListener('mousemove',function(ev){var t=ev.target;if(t.tagName==='rect'&&t.dataset.t){"
    "tip.textContent=t.dataset.t;tip.style.display='block';tip.style.left=(ev.clientX+12)+'px';"
    "tip.style.top=(ev.clientY+12)+'px';}else tip.style.display='none';});"
    "svg.addEventListener('mouseleave',function(){tip.style.display='none';});"
    "document.getElementById('reset').addEventListener('click',function(){x0=0;w=W;set();});set();"
    "document.body.setAttribute('data-ready','1');})();";

typedef struct row {
    const char *label;
    const oc__ptrack *t;
    uint8_t *level;   /* per event */
    int nlevels;
    bool is_core;
    bool is_steps;
} row;

static void levels_nested(row *r)
{
    const oc__ptrack *t = r->t;
    r->level = malloc(t->n ? t->n : 1);
    r->nlevels = 1;
    if (!r->level) return;
    uint64_t stack[64];
    int sp = 0;
    for (size_t i = 0; i < t->n; i++) {
        while (sp > 0 && stack[sp - 1] <= t->ev[i].t0) sp--;
        int lv = sp < 63 ? sp : 63;
        r->level[i] = (uint8_t)lv;
        if (lv + 1 > r->nlevels) r->nlevels = lv + 1;
        if (sp < 64) stack[sp++] = t->ev[i].t1;
    }
}

static void fmt_dur(char *b, size_t n, uint64_t ns)
{
    if (ns >= 1000000) snprintf(b, n, "%.3f ms", (double)ns / 1e6);
    else if (ns >= 1000) snprintf(b, n, "%.2f us", (double)ns / 1e3);
    else snprintf(b, n, "%llu ns", (unsigned long long)ns);
}

static void emit_rect(oc__pw *s, double x, double w, int y, const char *name, unsigned kind,
                      const oc__pev *e, size_t merged)
{
    char dur[32];
    if (w < 0.02) w = 0.02;
    oc__pw_printf(s, "<rect class=\"e\" x=\"%.3f\" y=\"%d\" width=\"%.3f\" height=\"%d\" fill=\"", x, y + 1, w,
                  ROW_H - 2);
    if (kind == OC_PROF_STEP) oc__pw_puts(s, "hsl(0,0%,85%)");
    else if (kind != OC_PROF_KERNEL && kind != OC_PROF_CALL && kind != OC_PROF_BLOCK && kind != OC_PROF_BUILD)
        oc__pw_puts(s, "hsl(210,10%,70%)");
    else oc__pw_printf(s, "hsl(%u,%d%%,%d%%)", hue_of(name), kind == OC_PROF_BLOCK || kind == OC_PROF_BUILD ? 35 : 65,
                       kind == OC_PROF_KERNEL ? 60 : 72);
    oc__pw_puts(s, "\" data-t=\"");
    if (merged > 1) {
        oc__pw_printf(s, "%zu spans", merged);
    } else {
        fmt_dur(dur, sizeof dur, e->t1 - e->t0);
        oc__pw_html(s, name);
        oc__pw_printf(s, " (%s) %s", oc__pkind_name(kind), dur);
        if (kind == OC_PROF_KERNEL)
            oc__pw_printf(s, "&#10;core %u of %u, in %llu B, out %llu B, tcm %llu B, stream %llu B", e->core,
                          e->ncores, (unsigned long long)e->a, (unsigned long long)e->b, (unsigned long long)e->c,
                          (unsigned long long)e->d);
    }
    oc__pw_puts(s, "\"></rect>");
}

oc_status oc__pexport_html(const oc__pdata *d, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return oc_set_error(OC_EIO, "oc_profiler_stop: cannot write '%s'", path);
    oc__pw s = {0};
    s.f = f;

    uint32_t nrows = d->ncores + d->nhost + 1;
    row *rows = calloc(nrows, sizeof *rows);
    uint32_t nr = 0;
    if (!rows) s.failed = true;
    for (uint32_t c = 0; rows && c < d->ncores; c++) {
        row *r = &rows[nr++];
        r->label = d->cores[c].name;
        r->t = &d->cores[c];
        r->is_core = true;
        r->level = oc__plane_assign(r->t, &r->nlevels);
    }
    if (rows && d->steps.n) {
        row *r = &rows[nr++];
        r->label = "steps";
        r->t = &d->steps;
        r->is_steps = true;
        levels_nested(r);
    }
    for (uint32_t h = 0; rows && h < d->nhost; h++) {
        row *r = &rows[nr++];
        r->label = d->host[h].name;
        r->t = &d->host[h];
        levels_nested(r);
    }
    int H = 0;
    for (uint32_t i = 0; i < nr; i++) H += rows[i].nlevels * ROW_H;
    if (H == 0) H = ROW_H;

    oc__pw_puts(&s, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>opcore profile ");
    oc__pw_html(&s, d->run);
    oc__pw_puts(&s, "</title><style>");
    oc__pw_puts(&s, CSS);
    oc__pw_puts(&s, "</style></head><body>\n<h1>opcore profile ");
    oc__pw_html(&s, d->run);
    oc__pw_puts(&s, "</h1><div class=\"meta\">host ");
    oc__pw_html(&s, d->hostname);
    oc__pw_printf(&s, " &middot; %s profile &middot; %.3f ms &middot; %u engine cores &middot; memory bandwidth "
                  "%.1f GB/s &middot; %llu events",
                  d->type == OC_PROFILE_OPERATOR ? "operator" : "trace", (double)(d->end_ns - d->start_ns) / 1e6,
                  d->ncores, d->membw_gbps, (unsigned long long)d->total_events);
    if (d->dropped) oc__pw_printf(&s, " &middot; <b>%llu dropped</b>", (unsigned long long)d->dropped);
    oc__pw_puts(&s, "</div>\n<h2>Timeline</h2><div class=\"hint\">wheel: zoom &middot; drag: pan &middot; "
                    "hover: details &middot; <button id=\"reset\">reset zoom</button></div>\n");

    /* legend: every op and block name with its colour */
    oc__pw_puts(&s, "<div class=\"legend\" id=\"legend\">");
    for (uint32_t i = 0; i < d->nops; i++) {
        const char *nm = oc__pname(d, d->ops[i].name);
        oc__pw_printf(&s, "<span><i class=\"sw\" style=\"background:hsl(%u,65%%,60%%)\"></i>", hue_of(nm));
        oc__pw_html(&s, nm);
        oc__pw_puts(&s, "</span>");
    }
    for (uint32_t i = 0; i < d->nblocks; i++) {
        const char *nm = oc__pname(d, d->blocks[i].name);
        oc__pw_printf(&s, "<span><i class=\"sw\" style=\"background:hsl(%u,35%%,72%%)\"></i>", hue_of(nm));
        oc__pw_html(&s, nm);
        oc__pw_puts(&s, "</span>");
    }
    oc__pw_puts(&s, "</div>\n<div id=\"tl\"><div id=\"labels\">");
    for (uint32_t i = 0; i < nr; i++) {
        oc__pw_printf(&s, "<div style=\"height:%dpx;line-height:%dpx\">", rows[i].nlevels * ROW_H, ROW_H);
        oc__pw_html(&s, rows[i].label);
        oc__pw_puts(&s, "</div>");
    }
    oc__pw_printf(&s, "</div><div id=\"plot\"><svg id=\"svg\" xmlns=\"http://www.w3.org/2000/svg\" "
                  "preserveAspectRatio=\"none\" viewBox=\"0 0 %.0f %d\" height=\"%d\" data-w=\"%.0f\" "
                  "data-h=\"%d\">", TL_W, H, H, TL_W, H);

    double span = (double)(d->end_ns > d->start_ns ? d->end_ns - d->start_ns : 1);
    double k = TL_W / span;
    int y0 = 0;
    for (uint32_t i = 0; i < nr; i++) {
        row *r = &rows[i];
        oc__pw_printf(&s, "<line x1=\"0\" x2=\"%.0f\" y1=\"%d\" y2=\"%d\" stroke=\"#e4e4e4\" "
                      "vector-effect=\"non-scaling-stroke\"/>", TL_W, y0 + r->nlevels * ROW_H,
                      y0 + r->nlevels * ROW_H);
        if (!r->level) {
            y0 += r->nlevels * ROW_H;
            continue;
        }
        for (int lv = 0; lv < r->nlevels; lv++) {
            /* pending merged run on this level */
            double px = 0, pend = -1;
            size_t pn = 0;
            const oc__pev *pe = NULL;
            for (size_t j = 0; j <= r->t->n; j++) {
                const oc__pev *e = j < r->t->n ? &r->t->ev[j] : NULL;
                if (e && r->level[j] != lv) continue;
                if (e && e->kind == OC_PROF_STEP && !r->is_steps) continue;
                double x = 0, x1 = 0;
                if (e) {
                    x = (double)(e->t0 - d->start_ns) * k;
                    x1 = (double)(e->t1 - d->start_ns) * k;
                }
                bool small = e && x1 - x < RES;
                if (pn && (!e || !small || x - pend > RES || pn >= 1000000)) {
                    if (pn == 1) {
                        char nm[48];
                        const char *name = oc__pname(d, pe->name);
                        if (r->is_steps) {
                            snprintf(nm, sizeof nm, "step %lld", (long long)pe->a);
                            name = nm;
                        }
                        emit_rect(&s, px, pend - px, y0 + lv * ROW_H, name, pe->kind, pe, 1);
                    } else {
                        emit_rect(&s, px, pend - px, y0 + lv * ROW_H, "", pe->kind, pe, pn);
                    }
                    pn = 0;
                }
                if (!e) break;
                if (small) {
                    if (!pn) {
                        px = x;
                        pe = e;
                    }
                    pend = x1 > pend || !pn ? x1 : pend;
                    pn++;
                } else {
                    char nm[48];
                    const char *name = oc__pname(d, e->name);
                    if (r->is_steps) {
                        snprintf(nm, sizeof nm, "step %lld", (long long)e->a);
                        name = nm;
                    }
                    emit_rect(&s, x, x1 - x, y0 + lv * ROW_H, name, e->kind, e, 1);
                }
            }
        }
        y0 += r->nlevels * ROW_H;
    }
    oc__pw_puts(&s, "</svg></div></div><div id=\"tip\"></div>\n");

    /* summary table */
    oc__pw_printf(&s, "<h2>Operators</h2><table id=\"ops\"><thead><tr><th class=\"l\">op</th><th>calls</th>"
                  "<th>total ms</th><th>mean us</th><th>min us</th><th>max us</th><th>kernel ms</th>"
                  "<th>cores</th><th>balance</th><th>MB moved</th><th>GB/s</th><th>%% of %.1f GB/s</th>",
                  d->membw_gbps);
    for (uint32_t c = 0; c < d->ncores && d->ncores <= 64; c++) oc__pw_printf(&s, "<th>core %u ms</th>", c);
    oc__pw_puts(&s, "</tr></thead><tbody>\n");
    for (uint32_t i = 0; i < d->nops; i++) {
        const oc__pop *op = &d->ops[i];
        const char *nm = oc__pname(d, op->name);
        oc__pw_printf(&s, "<tr><td class=\"l\"><i class=\"sw\" style=\"background:hsl(%u,65%%,60%%)\"></i>",
                      hue_of(nm));
        oc__pw_html(&s, nm);
        oc__pw_printf(&s, "</td><td>%llu</td><td>%.3f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.3f</td>"
                      "<td>%u</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.1f</td>",
                      (unsigned long long)op->calls, (double)op->call_ns / 1e6,
                      op->calls ? (double)op->call_ns / 1e3 / (double)op->calls : 0.0, (double)op->min_ns / 1e3,
                      (double)op->max_ns / 1e3, (double)op->kernel_wall_ns / 1e6, op->ncores, op->balance,
                      (double)op->bytes / 1e6, op->gbps, op->membw_frac * 100);
        for (uint32_t c = 0; c < d->ncores && d->ncores <= 64; c++)
            oc__pw_printf(&s, "<td>%.3f</td>", op->core_ns ? (double)op->core_ns[c] / 1e6 : 0.0);
        oc__pw_puts(&s, "</tr>\n");
    }
    if (!d->nops) oc__pw_puts(&s, "<tr><td class=\"l\" colspan=\"12\">no ops ran</td></tr>\n");
    oc__pw_puts(&s, "</tbody></table>\n");
    if (d->nblocks) {
        oc__pw_puts(&s, "<h2>Named blocks and builds</h2><table id=\"blocks\"><thead><tr><th class=\"l\">name</th>"
                        "<th class=\"l\">kind</th><th>count</th><th>total ms</th><th>mean us</th><th>min us</th>"
                        "<th>max us</th></tr></thead><tbody>\n");
        for (uint32_t i = 0; i < d->nblocks; i++) {
            const oc__pblock *b = &d->blocks[i];
            oc__pw_puts(&s, "<tr><td class=\"l\">");
            oc__pw_html(&s, oc__pname(d, b->name));
            oc__pw_printf(&s, "</td><td class=\"l\">%s</td><td>%llu</td><td>%.3f</td><td>%.2f</td><td>%.2f</td>"
                          "<td>%.2f</td></tr>\n", oc__pkind_name(b->kind), (unsigned long long)b->count,
                          (double)b->total_ns / 1e6, b->count ? (double)b->total_ns / 1e3 / (double)b->count : 0.0,
                          (double)b->min_ns / 1e3, (double)b->max_ns / 1e3);
        }
        oc__pw_puts(&s, "</tbody></table>\n");
    }
    if (d->steps.n) oc__pw_printf(&s, "<p class=\"meta\">%zu steps</p>\n", d->steps.n);
    oc__pw_puts(&s, "<script>");
    oc__pw_puts(&s, JS);
    oc__pw_puts(&s, "</script></body></html>\n");
    oc__pw_flush(&s);
    bool failed = s.failed || s.buf.oom;
    oc__pw_free(&s);
    if (fclose(f) != 0) failed = true;
    for (uint32_t i = 0; i < nr; i++) free(rows[i].level);
    free(rows);
    if (failed) return oc_set_error(OC_EIO, "oc_profiler_stop: writing '%s' failed", path);
    return OC_OK;
}
