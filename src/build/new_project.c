/* oc_new_project: what `opcore new NAME` and opcore.custom_op.new_project
 * write -- a small op project that builds and passes its tests at once
 * (the files are in src/build/templates/, carried in templates.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build/build_internal.h"
#include "build/sigcheck.h"
#include "build/templates.h"

/* `text` with every `from` replaced by `to`, appended to out. */
static void replace_all(oc__sb *out, const char *text, const char *from, const char *to)
{
    size_t fl = strlen(from);
    for (const char *p = text;;) {
        const char *hit = strstr(p, from);
        if (!hit) {
            oc__sb_put(out, p);
            return;
        }
        oc__sb_putn(out, p, (size_t)(hit - p));
        oc__sb_put(out, to);
        p = hit + fl;
    }
}

static oc_status make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return oc_set_error(OC_EINVAL, "opcore new: the path is too long: %s", path);
    for (char *p = buf + 1;; p++) {
        if (*p && *p != '/') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return oc_set_error(OC_EIO, "opcore new: cannot create %s: %s", buf, strerror(errno));
        if (!c) return OC_OK;
        *p = c;
    }
}

/* Write the files of `set` into dir, for project `name`. */
static oc_status write_project(const char *dir, const char *name, const oc__template *set)
{
    if (!name || !oc__is_c_identifier(name) || strlen(name) >= 64)
        return oc_set_error(OC_EINVAL,
                            "opcore new: the project name '%s' is not a C identifier (letters, digits "
                            "and '_', not starting with a digit, under 64 characters): it names the "
                            "op library lib<name>.so and its namespace torch.ops.<name>",
                            name ? name : "(null)");
    if (!dir || !*dir) dir = name;
    /* Refuse to overwrite anything, before writing anything. */
    char path[4096 + 128];
    oc__sb fname = {0};
    for (const oc__template *t = set; t->name; t++) {
        fname.len = 0;
        replace_all(&fname, t->name, "NAME", name);
        snprintf(path, sizeof path, "%s/%s", dir, oc__sb_str(&fname));
        if (access(path, F_OK) == 0) {
            oc__sb_free(&fname);
            return oc_set_error(OC_EEXIST, "opcore new: %s exists already; choose a new directory (nothing "
                                           "was written)", path);
        }
    }
    oc_status st = make_dirs(dir);
    for (const oc__template *t = set; t->name && !st; t++) {
        oc__sb text = {0};
        fname.len = 0;
        replace_all(&fname, t->name, "NAME", name);
        replace_all(&text, t->text, "@NAME@", name);
        snprintf(path, sizeof path, "%s/%s", dir, oc__sb_str(&fname));
        char *slash = strrchr(path, '/'); /* a file in a subfolder (templates_package) */
        *slash = '\0';
        st = make_dirs(path);
        *slash = '/';
        if (st) {
            oc__sb_free(&text);
            break;
        }
        FILE *f = text.oom || fname.oom ? NULL : fopen(path, "w");
        bool ok = f && fwrite(text.s, 1, text.len, f) == text.len;
        if (f && fclose(f) != 0) ok = false;
        if (!ok) st = oc_set_error(OC_EIO, "opcore new: cannot write %s: %s", path, strerror(errno));
        oc__sb_free(&text);
    }
    oc__sb_free(&fname);
    return st;
}

oc_status oc_new_project(const char *dir, const char *name) { return write_project(dir, name, oc__templates); }

/* Python's keywords (keyword.kwlist; the soft keywords are valid names):
 * a package named so cannot be imported. */
static bool python_keyword(const char *name)
{
    static const char *const kw[] = {
        "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
        "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global",
        "if", "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise",
        "return", "try", "while", "with", "yield"};
    for (size_t i = 0; i < sizeof kw / sizeof kw[0]; i++)
        if (strcmp(name, kw[i]) == 0) return true;
    return false;
}

oc_status oc_new_package(const char *dir, const char *name)
{
    if (name && python_keyword(name))
        return oc_set_error(OC_EINVAL,
                            "opcore new --package: the project name '%s' is a Python keyword: "
                            "it names the Python package (import %s would not parse); choose "
                            "another name",
                            name, name);
    return write_project(dir, name, oc__package_templates);
}
