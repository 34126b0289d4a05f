/* Noticing an op library loaded without opcore (see load_hint.h). */
#include <dlfcn.h>
#include <stdio.h>

#include "library/load_hint.h"
#include "opcore/library.h"

/* dlopen runs constructors on the thread that calls it: a per-thread depth
 * tells opcore's own loads from everybody else's. */
static _Thread_local int loading;

void oc__loader_enter(void) { loading++; }
void oc__loader_leave(void) { loading--; }

void oc_library_constructor(const void *self)
{
    if (loading > 0) return;
    Dl_info info;
    const char *path = dladdr(self, &info) && info.dli_fname ? info.dli_fname : "this library";
    /* The namespace, from the library's OC_LIBRARY block (already relocated). */
    const char *ns = NULL;
    void *h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
        const oc_library_decl *decl = dlsym(h, "oc_library_entry");
        if (decl && decl->name) ns = decl->name;
        dlclose(h);
    }
    fprintf(stderr,
            "opcore: %s is an opcore op library loaded by plain dlopen (torch.ops.load_library, "
            "ctypes): that registers none of its ops, so torch.ops.%s.<op> will not exist. Load it "
            "with opcore.custom_op.load_library('%s') in Python (or oc_library_load() in C).\n",
            path, ns ? ns : "<namespace>", path);
}
