/* src/profiler/report.c — a self-contained HTML report: a timeline (a row per
 * engine core, the steps, each host thread) and the operator table. No
 * network: inline CSS, JS and data.
 *
 * The timeline is drawn on a <canvas> by a small script from the events,
 * embedded as JSON: with 100,000 events an SVG (a DOM node per span) takes
 * seconds to lay out and every zoom re-renders all of it, while a canvas
 * redraw touches only the visible spans, and merges those narrower than a
 * pixel, so a frame costs about the same at any zoom.
 *
 * It opens on the work: from the first step marker (or, without steps, the
 * first op-level event: kernel, op call, imported operator) to the end of
 * the last event that starts after it, library builds excepted -- not on
 * the whole profile, where a build or an idle gap before the training can
 * squeeze it into a few pixels. Buttons switch to the whole profile and
 * back.
 *
 * The rows' labels and the table are plain HTML, so the page can be
 * inspected without running its script; the script marks <body
 * data-ready="1"> with the number of spans drawn once the canvas is drawn,
 * and exposes window.ocReport (view, setView, draw) for tests and the
 * benchmark (bench/html_report_bench.py).
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "opcore/status.h"
#include "profiler/prof.h"

#define ROW_H 16      /* px per nesting level (H in the script) */

static unsigned hue_of(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h % 360;
}

static const char *CSS =
    "body{font:13px/1.4 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:16px;color:#222}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:20px 0 6px}.meta{color:#555}"
    "#tl{display:flex;border:1px solid #ccc;user-select:none}#labels{flex:none;width:190px;background:#f7f7f7;"
    "border-right:1px solid #ccc}#labels div{box-sizing:border-box;padding:0 6px;white-space:nowrap;overflow:hidden;"
    "text-overflow:ellipsis;border-bottom:1px solid #e4e4e4;font-size:12px}#plot{flex:1;min-width:0;position:relative;"
    "cursor:grab}#plot canvas{display:block}#axis{height:18px;font-size:11px;color:#555;position:relative;"
    "margin-left:191px;white-space:nowrap}#tip{position:fixed;pointer-events:none;background:#222;color:#fff;"
    "padding:3px 6px;border-radius:3px;font-size:12px;display:none;white-space:pre;z-index:2}"
    "table{border-collapse:collapse;margin-top:4px}th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}"
    "th{background:#f0f0f0}td.l,th.l{text-align:left}.sw{display:inline-block;width:10px;height:10px;"
    "margin-right:5px;border:1px solid #0003}.hint{color:#777;font-size:12px}button{font-size:12px}";

/* The renderer. D: the data; rows are drawn level by level; within a level
 * spans do not overlap and are sorted, so the first visible one is found by
 * binary search and sub-pixel neighbours are merged into one rect. */
static const char *JS =
    "(function(){'use strict';"
    "var D=JSON.parse(document.getElementById('oc-data').textContent),H=16,"
    "plot=document.getElementById('plot'),cv=document.getElementById('cv'),ctx=cv.getContext('2d'),"
    "tip=document.getElementById('tip'),axis=document.getElementById('axis'),W=1,v0=D.view[0],v1=D.view[1],"
    "levels=[],y=0,drawn=0,pending=false,drag=null,lastMs=0;"
    /* per row and level: typed arrays of the spans */
    "D.rows.forEach(function(r){var e=r.e,n=e.length/5,cnt=new Array(r.n).fill(0),i,k;"
    "for(i=0;i<n;i++)cnt[e[5*i+4]]++;"
    "for(k=0;k<r.n;k++){var m=cnt[k];levels.push({y:y+k*H,row:r,t0:new Float64Array(m),t1:new Float64Array(m),"
    "nm:new Int32Array(m),ct:new Int32Array(m),ix:new Int32Array(m),n:0});}"
    "var base=levels.length-r.n;for(i=0;i<n;i++){var L=levels[base+e[5*i+4]],j=L.n++;L.t0[j]=e[5*i];"
    "L.t1[j]=e[5*i]+e[5*i+1];L.nm[j]=e[5*i+2];L.ct[j]=e[5*i+3];L.ix[j]=i;}y+=r.n*H;});"
    "var HT=Math.max(y,H);"
    "function first(L,t){var lo=0,hi=L.n;while(lo<hi){var m=(lo+hi)>>1;if(L.t0[m]<t)lo=m+1;else hi=m;}"
    "return lo>0&&L.t1[lo-1]>t?lo-1:lo;}"
    "function fmt(ns){return ns>=1e9?(ns/1e9).toFixed(3)+' s':ns>=1e6?(ns/1e6).toFixed(3)+' ms':"
    "ns>=1e3?(ns/1e3).toFixed(2)+' us':Math.round(ns)+' ns';}"
    "function size(){var dpr=window.devicePixelRatio||1;W=Math.max(100,plot.clientWidth);"
    "cv.width=Math.round(W*dpr);cv.height=Math.round(HT*dpr);cv.style.width=W+'px';cv.style.height=HT+'px';"
    "ctx.setTransform(dpr,0,0,dpr,0,0);}"
    "function draw(){pending=false;var T0=performance.now(),k=W/(v1-v0),nd=0,L,mx,me,last;"
    "ctx.clearRect(0,0,W,HT);ctx.font='11px sans-serif';ctx.textBaseline='middle';"
    /* the pending run of merged sub-pixel spans [mx, me), drawn in its color */
    "function flush(){if(mx>=0){ctx.fillRect(mx,L.y+1,Math.max(1,me-mx),H-2);nd++;mx=-1;}}"
    "function color(i){var c=D.color[L.nm[i]];if(c!==last){ctx.fillStyle=c;last=c;}}"
    "for(var li=0;li<levels.length;li++){L=levels[li];mx=-1;me=-1;last='';"
    "for(var i=first(L,v0);i<L.n&&L.t0[i]<=v1;i++){var x0=(L.t0[i]-v0)*k,x1=(L.t1[i]-v0)*k;if(x0<0)x0=0;"
    "if(x1>W)x1=W;"
    "if(x1-x0<1){if(mx>=0&&x0<=me+1){if(x1>me)me=x1;continue;}"
    "flush();color(i);mx=x0;me=Math.max(x1,x0+1);continue;}"
    "flush();color(i);ctx.fillRect(x0,L.y+1,x1-x0,H-2);nd++;"
    "if(x1-x0>40){ctx.fillStyle='#000';ctx.save();ctx.beginPath();ctx.rect(x0,L.y,x1-x0,H);ctx.clip();"
    "ctx.fillText(D.names[L.nm[i]],x0+3,L.y+H/2);ctx.restore();last='';}}"
    "flush();}"
    "drawn=nd;var s='';for(var a=0;a<=4;a++){s+='<span style=\"position:absolute;left:'+(a*W/4-(a?40:0))+"
    "'px\">'+fmt(v0+(v1-v0)*a/4)+'</span>';}axis.innerHTML=s;"
    "var B=document.body;if(!B.hasAttribute('data-ready'))performance.mark('oc-first-draw');"
    "B.setAttribute('data-ready','1');B.setAttribute('data-drawn',String(nd));"
    "B.setAttribute('data-view',Math.round(v0)+','+Math.round(v1));lastMs=performance.now()-T0;}"
    "function redraw(){if(!pending){pending=true;requestAnimationFrame(draw);}}"
    "function setView(a,b){var w=b-a,min=1e3;if(w<min){a-=(min-w)/2;w=min;}if(w>D.dur){a=0;w=D.dur;}"
    "if(a<0)a=0;if(a+w>D.dur)a=D.dur-w;v0=a;v1=a+w;redraw();}"
    "plot.addEventListener('wheel',function(ev){ev.preventDefault();var r=plot.getBoundingClientRect(),"
    "f=(ev.clientX-r.left)/r.width,c=v0+f*(v1-v0),z=ev.deltaY<0?0.8:1.25,w=(v1-v0)*z;setView(c-f*w,c-f*w+w);},"
    "{passive:false});"
    "plot.addEventListener('mousedown',function(ev){drag={x:ev.clientX,a:v0,b:v1};plot.style.cursor='grabbing';});"
    "window.addEventListener('mouseup',function(){drag=null;plot.style.cursor='';});"
    "window.addEventListener('mousemove',function(ev){if(drag){var d=(ev.clientX-drag.x)/W*(drag.b-drag.a);"
    "setView(drag.a-d,drag.b-d);tip.style.display='none';return;}"
    "var r=cv.getBoundingClientRect(),x=ev.clientX-r.left,yy=ev.clientY-r.top;"
    "if(x<0||yy<0||x>W||yy>HT){tip.style.display='none';return;}"
    "var L=null;for(var i=0;i<levels.length;i++)if(yy>=levels[i].y&&yy<levels[i].y+H)L=levels[i];"
    "var t=v0+x/W*(v1-v0),slack=2*(v1-v0)/W,j=L?first(L,t-slack):0;"
    "if(L&&j<L.n&&L.t0[j]<=t+slack){var r2=L.row,ix=L.ix[j],txt=D.names[L.nm[j]]+' ('+D.cats[L.ct[j]]+') '+"
    "fmt(L.t1[j]-L.t0[j])+'\\n'+r2.l+', at '+fmt(L.t0[j]);if(r2.x)txt+='\\nin '+r2.x[4*ix]+' B, out '+"
    "r2.x[4*ix+1]+' B, tcm '+r2.x[4*ix+2]+' B, stream '+r2.x[4*ix+3]+' B';tip.textContent=txt;"
    "tip.style.display='block';tip.style.left=(ev.clientX+12)+'px';tip.style.top=(ev.clientY+12)+'px';}"
    "else tip.style.display='none';});"
    "document.getElementById('fit').addEventListener('click',function(){setView(D.work[0],D.work[1]);});"
    "document.getElementById('all').addEventListener('click',function(){setView(0,D.dur);});"
    "window.addEventListener('resize',function(){size();redraw();});"
    "window.ocReport={view:function(){return[v0,v1];},setView:setView,draw:function(){draw();return drawn;},"
    "work:D.work,dur:D.dur,lastDrawMs:function(){return lastMs;},spans:function(){return drawn;}};"
    "size();draw();})();";

/* ---- the data -------------------------------------------------------------- */

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
    r->level = oc__malloc(t->n ? t->n : 1);
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
        else stack[63] = t->ev[i].t1 > stack[63] ? t->ev[i].t1 : stack[63];
    }
}

/* The window the report opens on (see the top); ns from the profile start. */
static void work_window(const oc__pdata *d, uint64_t *lo_out, uint64_t *hi_out)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    if (d->steps.n) lo = d->steps.ev[0].t0;
    for (uint32_t c = 0; !d->steps.n && c < d->ncores; c++)
        if (d->cores[c].n && d->cores[c].ev[0].t0 < lo) lo = d->cores[c].ev[0].t0;
    for (uint32_t h = 0; !d->steps.n && h < d->nhost; h++)
        for (size_t i = 0; i < d->host[h].n; i++)
            if (oc__pis_op(&d->host[h].ev[i])) {
                if (d->host[h].ev[i].t0 < lo) lo = d->host[h].ev[i].t0;
                break;  /* sorted by t0 */
            }
    if (lo == UINT64_MAX) lo = d->start_ns;
    for (uint32_t c = 0; c < d->ncores; c++)
        for (size_t i = 0; i < d->cores[c].n; i++)
            if (d->cores[c].ev[i].t0 >= lo && d->cores[c].ev[i].t1 > hi) hi = d->cores[c].ev[i].t1;
    for (uint32_t h = 0; h < d->nhost; h++)
        for (size_t i = 0; i < d->host[h].n; i++) {
            const oc__pev *e = &d->host[h].ev[i];
            if (e->t0 >= lo && e->kind != OC_PROF_BUILD && e->t1 > hi) hi = e->t1;
        }
    if (d->steps.n && d->steps.ev[d->steps.n - 1].t0 > hi) hi = d->steps.ev[d->steps.n - 1].t0;
    if (hi <= lo) {
        lo = d->start_ns;
        hi = d->end_ns;
    }
    uint64_t margin = (hi - lo) / 50;
    lo = lo - d->start_ns > margin ? lo - margin : d->start_ns;
    hi = d->end_ns - hi > margin ? hi + margin : d->end_ns;
    *lo_out = lo - d->start_ns;
    *hi_out = hi - d->start_ns;
}

static void emit_data(oc__pw *s, const oc__pdata *d, row *rows, uint32_t nr)
{
    uint64_t lo, hi;
    work_window(d, &lo, &hi);
    uint64_t dur = d->end_ns > d->start_ns ? d->end_ns - d->start_ns : 1;
    oc__pw_printf(s, "{\"dur\":%llu,\"work\":[%llu,%llu],\"view\":[%llu,%llu],\"names\":[", (unsigned long long)dur,
                  (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)lo, (unsigned long long)hi);
    for (uint32_t i = 0; i < d->nnames; i++) {
        if (i) oc__pw_puts(s, ",");
        oc__pw_json_str_html(s, d->names[i]);
    }
    for (size_t i = 0; i < d->steps.n; i++)  /* then the steps' names */
        oc__pw_printf(s, "%s\"step %lld\"", i || d->nnames ? "," : "", (long long)d->steps.ev[i].a);
    oc__pw_puts(s, "],\"color\":[");
    for (uint32_t i = 0; i < d->nnames; i++)
        oc__pw_printf(s, "%s\"hsl(%u,60%%,66%%)\"", i ? "," : "", hue_of(d->names[i]));
    for (size_t i = 0; i < d->steps.n; i++) oc__pw_printf(s, "%s\"hsl(0,0%%,84%%)\"", i || d->nnames ? "," : "");
    oc__pw_puts(s, "],\"cats\":[");
    /* category ids: the kinds, then one per name (imported categories) */
    for (unsigned k = 0; k <= OC_PROF_EXTERNAL; k++) oc__pw_printf(s, "%s\"%s\"", k ? "," : "", oc__pkind_name(k));
    for (uint32_t i = 0; i < d->nnames; i++) {
        oc__pw_puts(s, ",");
        oc__pw_json_str_html(s, d->names[i]);
    }
    oc__pw_puts(s, "],\"rows\":[");
    for (uint32_t r = 0; r < nr; r++) {
        const row *w = &rows[r];
        oc__pw_puts(s, r ? ",{\"l\":" : "{\"l\":");
        oc__pw_json_str_html(s, w->label);
        oc__pw_printf(s, ",\"n\":%d,\"e\":[", w->nlevels);
        for (size_t i = 0; i < w->t->n && w->level; i++) {
            const oc__pev *e = &w->t->ev[i];
            uint32_t cat = e->kind == OC_PROF_EXTERNAL ? OC_PROF_EXTERNAL + 1 + oc__pext_cat(e) : e->kind;
            oc__pw_printf(s, "%s%llu,%llu,%u,%u,%u", i ? "," : "", (unsigned long long)(e->t0 - d->start_ns),
                          (unsigned long long)(e->t1 - e->t0), w->is_steps ? d->nnames + (uint32_t)i : e->name, cat,
                          (unsigned)w->level[i]);
        }
        oc__pw_puts(s, "]");
        if (w->is_core) {
            oc__pw_puts(s, ",\"x\":[");
            for (size_t i = 0; i < w->t->n; i++) {
                const oc__pev *e = &w->t->ev[i];
                oc__pw_printf(s, "%s%llu,%llu,%llu,%llu", i ? "," : "", (unsigned long long)e->a,
                              (unsigned long long)e->b, (unsigned long long)e->c, (unsigned long long)e->d);
            }
            oc__pw_puts(s, "]");
        }
        oc__pw_puts(s, "}");
    }
    oc__pw_puts(s, "]}");
}

/* ---- the table ------------------------------------------------------------- */

static void op_table(oc__pw *s, const oc__pdata *d)
{
    bool cores = d->ncores <= 64;
    oc__pw_printf(s, "<h2>Operators</h2><table id=\"ops\"><thead><tr><th class=\"l\">op</th><th class=\"l\">source"
                  "</th><th>calls</th><th>total ms</th><th>mean us</th><th>min us</th><th>max us</th><th>kernel ms"
                  "</th><th>cores</th><th>balance</th><th>MB moved</th><th>GB/s</th><th>%% of %.1f GB/s</th>",
                  d->membw_gbps);
    for (uint32_t c = 0; cores && c < d->ncores; c++) oc__pw_printf(s, "<th>core %u ms</th>", c);
    oc__pw_puts(s, "</tr></thead><tbody>\n");
    for (uint32_t i = 0; i < d->nops; i++) {
        const oc__pop *op = &d->ops[i];
        const char *nm = oc__pname(d, op->name);
        oc__pw_puts(s, "<tr class=\"op\" data-op=\"");
        oc__pw_html(s, nm);
        oc__pw_puts(s, "\" data-source=\"");
        oc__pw_html(s, oc__pop_source(d, op));
        oc__pw_printf(s, "\"><td class=\"l\"><i class=\"sw\" style=\"background:hsl(%u,60%%,66%%)\"></i>", hue_of(nm));
        oc__pw_html(s, nm);
        oc__pw_puts(s, "</td><td class=\"l\">");
        oc__pw_html(s, oc__pop_source(d, op));
        oc__pw_printf(s, "</td><td>%llu</td><td>%.3f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td>",
                      (unsigned long long)op->calls, (double)op->call_ns / 1e6,
                      op->calls ? (double)op->call_ns / 1e3 / (double)op->calls : 0.0, (double)op->min_ns / 1e3,
                      (double)op->max_ns / 1e3);
        if (op->source == UINT32_MAX)
            oc__pw_printf(s, "<td>%.3f</td><td>%u</td><td>%.2f</td><td>%.2f</td><td>%.2f</td><td>%.1f</td>",
                          (double)op->kernel_wall_ns / 1e6, op->ncores, op->balance, (double)op->bytes / 1e6,
                          op->gbps, op->membw_frac * 100);
        else
            oc__pw_puts(s, "<td></td><td></td><td></td><td></td><td></td><td></td>");
        for (uint32_t c = 0; cores && c < d->ncores; c++) {
            if (op->source == UINT32_MAX) oc__pw_printf(s, "<td>%.3f</td>", op->core_ns ? (double)op->core_ns[c] / 1e6 : 0.0);
            else oc__pw_puts(s, "<td></td>");
        }
        oc__pw_puts(s, "</tr>\n");
    }
    if (!d->nops) oc__pw_puts(s, "<tr><td class=\"l\" colspan=\"13\">no ops ran</td></tr>\n");
    oc__pw_puts(s, "</tbody></table>\n");
    if (d->nblocks) {
        oc__pw_puts(s, "<h2>Named blocks and builds</h2><table id=\"blocks\"><thead><tr><th class=\"l\">name</th>"
                       "<th class=\"l\">kind</th><th>count</th><th>total ms</th><th>mean us</th><th>min us</th>"
                       "<th>max us</th></tr></thead><tbody>\n");
        for (uint32_t i = 0; i < d->nblocks; i++) {
            const oc__pblock *b = &d->blocks[i];
            oc__pw_puts(s, "<tr><td class=\"l\">");
            oc__pw_html(s, oc__pname(d, b->name));
            oc__pw_printf(s, "</td><td class=\"l\">%s</td><td>%llu</td><td>%.3f</td><td>%.2f</td><td>%.2f</td>"
                          "<td>%.2f</td></tr>\n", oc__pkind_name(b->kind), (unsigned long long)b->count,
                          (double)b->total_ns / 1e6, b->count ? (double)b->total_ns / 1e3 / (double)b->count : 0.0,
                          (double)b->min_ns / 1e3, (double)b->max_ns / 1e3);
        }
        oc__pw_puts(s, "</tbody></table>\n");
    }
}

oc_status oc__pexport_html(const oc__pdata *d, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return oc_set_error(OC_EIO, "oc_profiler_stop: cannot write '%s'", path);
    oc__pw s = {0};
    s.f = f;

    uint32_t nrows = d->ncores + d->nhost + 1;
    row *rows = oc__calloc(nrows, sizeof *rows);
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
    for (uint32_t i = 0; i < nr; i++)
        if (!rows[i].level) s.failed = true;

    oc__pw_puts(&s, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>opcore profile ");
    oc__pw_html(&s, d->run);
    oc__pw_puts(&s, "</title><style>");
    oc__pw_puts(&s, CSS);
    oc__pw_puts(&s, "</style></head><body>\n<h1>opcore profile ");
    oc__pw_html(&s, d->run);
    oc__pw_puts(&s, "</h1><div class=\"meta\">host ");
    oc__pw_html(&s, d->hostname);
    oc__pw_printf(&s, " &middot; %s profile &middot; %.3f ms &middot; %u engine cores &middot; %llu events",
                  d->type == OC_PROFILE_OPERATOR ? "operator" : "trace", (double)(d->end_ns - d->start_ns) / 1e6,
                  d->ncores, (unsigned long long)d->total_events);
    if (d->imported) oc__pw_printf(&s, " (%llu imported)", (unsigned long long)d->imported);
    if (d->dropped) oc__pw_printf(&s, " &middot; <b>%llu dropped</b>", (unsigned long long)d->dropped);
    oc__pw_printf(&s, "<br>memory bandwidth %.1f GB/s: ", d->membw_gbps);
    oc__pw_html(&s, d->membw_how);
    oc__pw_puts(&s, "</div>\n<h2>Timeline</h2><div class=\"hint\">wheel: zoom &middot; drag: pan &middot; "
                    "hover: details &middot; <button id=\"fit\">the work</button> "
                    "<button id=\"all\">whole profile</button></div>\n<div id=\"axis\"></div>"
                    "<div id=\"tl\"><div id=\"labels\">");
    for (uint32_t i = 0; i < nr; i++) {
        oc__pw_printf(&s, "<div class=\"lane%s\" style=\"height:%dpx;line-height:%dpx\"",
                      rows[i].is_core ? " core" : rows[i].is_steps ? " steps" : " host", rows[i].nlevels * ROW_H,
                      ROW_H);
        if (rows[i].is_core) oc__pw_printf(&s, " data-core=\"%u\"", i);
        oc__pw_puts(&s, ">");
        oc__pw_html(&s, rows[i].label);
        oc__pw_puts(&s, "</div>");
    }
    oc__pw_puts(&s, "</div><div id=\"plot\"><canvas id=\"cv\"></canvas></div></div><div id=\"tip\"></div>\n");
    op_table(&s, d);
    if (d->steps.n) oc__pw_printf(&s, "<p class=\"meta\">%zu steps</p>\n", d->steps.n);
    oc__pw_puts(&s, "<script id=\"oc-data\" type=\"application/json\">");
    if (!s.failed) emit_data(&s, d, rows, nr);
    oc__pw_puts(&s, "</script>\n<script>");
    oc__pw_puts(&s, JS);
    oc__pw_puts(&s, "</script></body></html>\n");
    oc__pw_flush(&s);
    bool failed = s.failed || s.buf.oom;
    oc__pw_free(&s);
    if (fclose(f) != 0) failed = true;
    for (uint32_t i = 0; i < nr; i++) oc__free(rows[i].level);
    oc__free(rows);
    if (failed) return oc_set_error(OC_EIO, "oc_profiler_stop: writing '%s' failed", path);
    return OC_OK;
}
