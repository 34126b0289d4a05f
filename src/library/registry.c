/* The process-wide table of loaded op libraries. Loading resolves each
 * op's kernel by name and prepares its libffi call descriptor once, so a
 * call only has to fill argument slots. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "engine/core.h"
#include "library/elfcheck.h"
#include "library/load_hint.h"
#include "library/registry.h"
#include "opcore/engine.h"
#include "opcore/host.h"

static pthread_rwlock_t registry_lock = PTHREAD_RWLOCK_INITIALIZER;
/* Libraries taken out of the table (reloaded, forgotten, unloaded) while
 * callers may still hold their ops: their records stay until the process
 * ends, linked through `retired_next`, so a late call finds `unloaded` set
 * instead of freed memory. */
static oc_library *retired;
static _Atomic uint64_t registry_generation = 1;

uint64_t oc_registry_generation(void) { return registry_generation; }
static oc_library **libraries;
static int num_libraries, cap_libraries;

/* oc_scalar as libffi sees it: two 8-byte integer words (SysV classifies
 * the {int64_t, union{double,int64_t,bool}} pair as INTEGER, INTEGER). */
static ffi_type *scalar_elements[] = {&ffi_type_sint64, &ffi_type_sint64, NULL};
static ffi_type scalar_ffi_type = {0, 0, FFI_TYPE_STRUCT, scalar_elements};

/* The list structs of args.h: {int64_t count; pointer items;}. */
static ffi_type *list_elements[] = {&ffi_type_sint64, &ffi_type_pointer, NULL};
static ffi_type list_ffi_type = {0, 0, FFI_TYPE_STRUCT, list_elements};

static ffi_type *ffi_type_of(const oc_schema_arg *a)
{
    if (a->optional) return &ffi_type_pointer; /* const T *, NULL for None */
    switch (a->type) {
    case OC_ARG_TENSOR:
    case OC_ARG_DICT:
    case OC_ARG_STR: return &ffi_type_pointer;
    case OC_ARG_FLOAT: return &ffi_type_double;
    case OC_ARG_INT: return &ffi_type_sint64;
    case OC_ARG_BOOL: return &ffi_type_uint8;
    case OC_ARG_SCALAR: return &scalar_ffi_type;
    case OC_ARG_DTYPE: return &ffi_type_sint; /* an enum is an int */
    case OC_ARG_TENSOR_LIST:
    case OC_ARG_INT_LIST:
    case OC_ARG_FLOAT_LIST: return &list_ffi_type;
    case OC_ARG_NONE: break;
    }
    return &ffi_type_void;
}

/* A library's records (the oc_library, its ops array) live in mappings of
 * their own, outside opcore's replaceable allocator: an unloaded library
 * keeps them for good (see `retired`), which must not count against --
 * or outlive -- the allocator in use. Zero-filled. */
static void *records_map(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static oc_library *find_locked(const char *name)
{
    for (int i = 0; i < num_libraries; i++)
        if (strcmp(libraries[i]->name, name) == 0) return libraries[i];
    return NULL;
}

static oc_status read_build_info(oc_library *lib)
{
    const oc_build_info *info = dlsym(lib->handle, "oc_build_info_entry");
    if (!info)
        return oc_set_error(OC_EABI, "%s was not built by `opcore build` (no build info): rebuild it",
                            lib->path);
    if (info->abi_version != OC_ABI_VERSION)
        return oc_set_error(OC_EABI,
                            "%s was built for opcore ABI %u but this runtime is ABI %u: rebuild it",
                            lib->path, info->abi_version, OC_ABI_VERSION);
    lib->multicore = info->multicore != 0;
    lib->debug = info->debug != 0;
    lib->stack_size = info->stack_size ? info->stack_size : OC_DEFAULT_STACK_SIZE;
    if (lib->stack_size > OC_MAX_STACK_SIZE) /* opcore build refuses it: a library from elsewhere */
        return oc_set_error(OC_EINVAL, "%s asks for a kernel stack of %zu bytes; the engine maps at most %zu "
                            "(OC_MAX_STACK_SIZE): rebuild it with a smaller --stack-size",
                            lib->path, lib->stack_size, OC_MAX_STACK_SIZE);
    snprintf(lib->cflags, sizeof lib->cflags, "%s", info->cflags ? info->cflags : "");
    return OC_OK;
}

static oc_status bind_ops(oc_library *lib, const oc_library_defs *defs)
{
    lib->ops_bytes = (size_t)(defs->num_defs ? defs->num_defs : 1) * sizeof *lib->ops;
    lib->ops = records_map(lib->ops_bytes);
    if (!lib->ops) return oc_set_error(OC_ENOMEM, "out of memory loading %s", lib->path);
    for (int i = 0; i < defs->num_defs; i++) {
        struct oc_op *op = &lib->ops[i];
        char proto[2048];
        op->def = defs->defs[i];
        op->lib = lib;
        op->multicore = op->def.options.multicore || (lib->multicore && !op->def.options.single_core);
        op->stack_size = op->def.options.stack_size ? op->def.options.stack_size : lib->stack_size;
        if (op->stack_size > OC_MAX_STACK_SIZE)
            return oc_set_error(OC_EINVAL, "op '%s::%s': its stack_size option asks for %zu bytes; the engine "
                                "maps at most %zu (OC_MAX_STACK_SIZE)", lib->name, op->def.schema.name,
                                op->stack_size, OC_MAX_STACK_SIZE);
        op->num_results = op->def.schema.num_results;
        op->fresh_results = oc__schema_fresh_results(&op->def.schema);
        op->returns_tensor = oc__schema_returns_tensor(&op->def.schema);
        snprintf(op->name, sizeof op->name, "%s", op->def.schema.name);
        snprintf(op->qualname, sizeof op->qualname, "%s::%s", lib->name, op->name);
        op->kernel_fn = (oc_fn)dlsym(lib->handle, op->def.kernel_name);
        if (!op->kernel_fn) {
            oc__schema_prototype(&op->def.schema, op->def.kernel_name, proto, sizeof proto);
            return oc_set_error(OC_ENOTFOUND,
                                "op '%s': kernel '%s' is not defined in %s (expected a non-static "
                                "function `%s;` in a compute source)",
                                op->qualname, op->def.kernel_name, lib->path, proto);
        }
        for (int a = 0; a < op->def.schema.num_args; a++)
            op->ffi_args[a] = ffi_type_of(&op->def.schema.args[a]);
        if (ffi_prep_cif(&op->cif, FFI_DEFAULT_ABI, (unsigned)op->def.schema.num_args,
                         op->returns_tensor ? &ffi_type_pointer : &ffi_type_void, op->ffi_args) != FFI_OK)
            return oc_set_error(OC_ERROR, "op '%s': libffi could not describe its signature",
                                op->qualname);
        op->direct = oc__direct_plan(&op->cif, op->direct_kind);
        lib->num_ops++;
    }
    return OC_OK;
}

/* A new name for `path` (a hard link beside it, else a copy in the temp
 * directory) that the dynamic loader has never seen. On failure sets the
 * error (naming the library as `shown`) and returns false. */
static bool fresh_link(const char *path, const char *shown, char *out, size_t len)
{
    static _Atomic unsigned counter;
    snprintf(out, len, "%s.reload-%d-%u", path, (int)getpid(), atomic_fetch_add(&counter, 1));
    if (link(path, out) == 0) return true;
    const char *tmp = getenv("TMPDIR");
    snprintf(out, len, "%s/opcore-reload-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int dst = mkstemp(out), src = open(path, O_RDONLY | O_CLOEXEC);
    bool ok = dst >= 0 && src >= 0;
    char buf[65536];
    ssize_t n = 0; /* (set before its use; -O1 cannot tell) */
    while (ok && (n = read(src, buf, sizeof buf)) > 0) ok = write(dst, buf, (size_t)n) == n;
    ok = ok && n == 0; /* a read error is not the end of the file */
    if (src >= 0) close(src);
    if (dst >= 0) close(dst);
    if (!ok) {
        if (dst >= 0) unlink(out);
        oc_set_error(OC_EIO, "cannot reload op library %s: cannot make a fresh copy of %s: %s", shown, path,
                     strerror(errno));
    }
    return ok;
}

static void library_free(oc_library *lib)
{
    if (!lib) return;
    if (lib->handle) dlclose(lib->handle);
    if (lib->ops) munmap(lib->ops, lib->ops_bytes);
    munmap(lib, sizeof *lib);
}

/* Where `lib` is in the table, or -1. */
static int slot_locked(const oc_library *lib)
{
    for (int i = 0; i < num_libraries; i++)
        if (libraries[i] == lib) return i;
    return -1;
}

/* Take libraries[i] out of the table (the caller frees or retires it). */
static void remove_locked(int i)
{
    libraries[i] = libraries[--num_libraries];
    registry_generation++;
}

/* Take libraries[i] out of the table but keep its records for good:
 * callers may still hold its ops. */
static void retire_locked(int i)
{
    libraries[i]->retired_next = retired;
    retired = libraries[i];
    remove_locked(i);
}

/* `replacing`: a library of the same name from the same path (an older
 * build of this file), which the new one takes over from. */
static oc_status register_locked(oc_library *lib, oc_library *replacing)
{
    oc_library *other = find_locked(lib->name);
    if (other && other == replacing) {
        retire_locked(slot_locked(other));
        other = NULL;
    }
    if (other)
        return oc_set_error(OC_EEXIST,
                            "library '%s' from %s clashes with library '%s' already loaded from %s "
                            "(library names must be unique in a process)",
                            lib->name, lib->path, other->name, other->path);
    if (num_libraries == cap_libraries) {
        int cap = cap_libraries ? 2 * cap_libraries : 8;
        oc_library **grown = oc__realloc(libraries, (size_t)cap * sizeof *grown);
        if (!grown) return oc_set_error(OC_ENOMEM, "out of memory");
        libraries = grown;
        cap_libraries = cap;
    }
    libraries[num_libraries++] = lib;
    registry_generation++;
    return OC_OK;
}

oc_status oc_library_load(const char *path, oc_library **out)
{
    struct stat st;
    char real[4096];
    if (out) *out = NULL;
    if (!path || !out) return oc_set_error(OC_EINVAL, "oc_library_load: path and out are required");
    if (!realpath(path, real) || stat(real, &st) != 0)
        return oc_set_error(OC_ENOTFOUND, "cannot load op library %s: no such file", path);

    /* Loading the same file again is a no-op, as with torch.ops.load_library;
     * a new file at the same path (rebuilt) replaces the library loaded from
     * it. */
    oc_library *replacing = NULL;
    pthread_rwlock_rdlock(&registry_lock);
    for (int i = 0; i < num_libraries; i++) {
        oc_library *lib = libraries[i];
        if (strcmp(lib->path, real) != 0) continue;
        if (lib->dev == st.st_dev && lib->ino == st.st_ino) {
            *out = lib;
            pthread_rwlock_unlock(&registry_lock);
            return OC_OK;
        }
        replacing = lib;
    }
    /* the loader still maps every retired library under its path */
    bool seen = replacing != NULL;
    for (const oc_library *r = retired; r && !seen; r = r->retired_next)
        seen = r->handle && strcmp(r->path, real) == 0;
    pthread_rwlock_unlock(&registry_lock);

    if (oc__elf_check_file(real, path) != OC_OK) return oc_errcode(); /* before dlopen trusts it */
    oc_library *lib = records_map(sizeof *lib);
    if (!lib) return oc_set_error(OC_ENOMEM, "out of memory loading %s", path);
    snprintf(lib->path, sizeof lib->path, "%s", real);
    lib->dev = st.st_dev;
    lib->ino = st.st_ino;
    /* The dynamic loader hands back an already loaded object for a path it
     * has seen, even if the file was replaced: a rebuilt library is opened
     * through a link of its own. */
    char fresh[4096 + 64];
    const char *open_path = real;
    if (seen) {
        if (!fresh_link(real, path, fresh, sizeof fresh)) {
            library_free(lib);
            return OC_EIO;
        }
        open_path = fresh;
    }
    oc__loader_enter();
    lib->handle = dlopen(open_path, RTLD_NOW | RTLD_LOCAL);
    oc__loader_leave();
    if (seen) unlink(fresh); /* the mapping stays; the name is not needed */
    if (!lib->handle) {
        oc_set_error(OC_ENOTFOUND, "cannot load op library %s: %s", path, dlerror());
        library_free(lib);
        return OC_ENOTFOUND;
    }
    oc_library_defs defs;
    oc_status status = read_build_info(lib);
    if (status == OC_OK) status = oc__library_read_defs(lib->handle, lib->path, &defs);
    if (status != OC_OK) {
        library_free(lib);
        return status;
    }
    snprintf(lib->name, sizeof lib->name, "%s", defs.name);
    status = bind_ops(lib, &defs);
    oc__library_defs_free(&defs);
    if (status == OC_OK) {
        pthread_rwlock_wrlock(&registry_lock);
        status = register_locked(lib, replacing);
        pthread_rwlock_unlock(&registry_lock);
    }
    if (status != OC_OK) {
        library_free(lib);
        return status;
    }
    *out = lib; /* (running its OC_LIBRARY block re-asserted opcore's fault handlers: escape.c) */
    return OC_OK;
}

/* ---- unload safety ------------------------------------------------------ */

/* An unload waits here for the calls still running in its library. */
static pthread_mutex_t calls_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t calls_done = PTHREAD_COND_INITIALIZER;

oc_status oc__op_enter(const struct oc_op *op)
{
    oc_library *lib = op->lib;
    /* Both sides sequentially consistent: either this call sees `unloaded`,
     * or the unloading thread sees this call counted (and waits for it). */
    atomic_fetch_add(&lib->calls, 1);
    if (!atomic_load(&lib->unloaded)) return OC_OK;
    oc__op_leave(op);
    return oc_set_error(OC_ENOTFOUND, "op '%s': its library '%s' was unloaded (from %s); load it again to "
                        "call its ops", op->qualname, lib->name, lib->path);
}

void oc__op_leave(const struct oc_op *op)
{
    oc_library *lib = op->lib;
    if (atomic_fetch_sub(&lib->calls, 1) == 1 && atomic_load(&lib->unloaded)) {
        pthread_mutex_lock(&calls_lock);
        pthread_cond_broadcast(&calls_done);
        pthread_mutex_unlock(&calls_lock);
    }
}

/* Take `lib` out of the table, make calls that start from now on fail,
 * and wait for the ones running to return. */
static oc_status drain(oc_library *lib, const char *fn)
{
    pthread_rwlock_wrlock(&registry_lock);
    int i = slot_locked(lib);
    if (i >= 0) {
        atomic_store(&lib->unloaded, true);
        retire_locked(i);
        if (num_libraries == 0) {
            oc__free(libraries);
            libraries = NULL;
            cap_libraries = 0;
        }
    }
    pthread_rwlock_unlock(&registry_lock);
    if (i < 0) return oc_set_error(OC_ENOTFOUND, "%s: library '%s' is not loaded (unloaded already?)", fn, lib->name);
    pthread_mutex_lock(&calls_lock);
    while (atomic_load(&lib->calls) > 0) pthread_cond_wait(&calls_done, &calls_lock);
    pthread_mutex_unlock(&calls_lock);
    return OC_OK;
}

oc_status oc_library_unload(oc_library *lib)
{
    if (!lib) return oc_set_error(OC_EINVAL, "oc_library_unload: library is NULL");
    oc_status st = drain(lib, "oc_library_unload");
    if (st != OC_OK) return st;
    /* no call is running its code, and none can start: unmap it */
    dlclose(lib->handle);
    lib->handle = NULL;
    return OC_OK;
}

oc_status oc_library_forget(oc_library *lib)
{
    if (!lib) return oc_set_error(OC_EINVAL, "oc_library_forget: library is NULL");
    return drain(lib, "oc_library_forget");
}

oc_library *oc_library_find(const char *name)
{
    pthread_rwlock_rdlock(&registry_lock);
    oc_library *lib = name ? find_locked(name) : NULL;
    pthread_rwlock_unlock(&registry_lock);
    return lib;
}

const oc_op *oc_op_find(const char *qualname)
{
    char lib_name[OC_MAX_NAME];
    const char *sep = qualname ? strstr(qualname, "::") : NULL;
    if (!sep || (size_t)(sep - qualname) >= sizeof lib_name) {
        oc_set_error(OC_EINVAL, "oc_op_find: expected \"library::op\", got \"%s\"",
                     qualname ? qualname : "(null)");
        return NULL;
    }
    memcpy(lib_name, qualname, (size_t)(sep - qualname));
    lib_name[sep - qualname] = '\0';
    const oc_op *found = NULL;
    pthread_rwlock_rdlock(&registry_lock);
    oc_library *lib = find_locked(lib_name);
    for (int i = 0; lib && i < lib->num_ops && !found; i++)
        if (strcmp(lib->ops[i].name, sep + 2) == 0) found = &lib->ops[i];
    pthread_rwlock_unlock(&registry_lock);
    if (!found) {
        if (!lib) oc_set_error(OC_ENOTFOUND, "no op '%s': no library '%s' is loaded", qualname, lib_name);
        else oc_set_error(OC_ENOTFOUND, "no op '%s': library '%s' (%s) has no op '%s'", qualname,
                          lib_name, lib->path, sep + 2);
    }
    return found;
}

const char *oc_library_name(const oc_library *lib) { return lib->name; }
const char *oc_library_path(const oc_library *lib) { return lib->path; }
bool oc_library_multicore(const oc_library *lib) { return lib->multicore; }
bool oc_library_debug(const oc_library *lib) { return lib->debug; }
size_t oc_library_stack_size(const oc_library *lib) { return lib->stack_size; }
const char *oc_library_cflags(const oc_library *lib) { return lib->cflags; }
int oc_library_num_ops(const oc_library *lib) { return lib->num_ops; }

const oc_op *oc_library_op(const oc_library *lib, int index)
{
    if (index < 0 || index >= lib->num_ops) {
        oc_set_error(OC_EINVAL, "library '%s' has %d ops; index %d is out of range", lib->name,
                     lib->num_ops, index);
        return NULL;
    }
    return &lib->ops[index];
}

const char *oc_op_name(const oc_op *op) { return op->name; }
const char *oc_op_qualname(const oc_op *op) { return op->qualname; }
const char *oc_op_schema(const oc_op *op) { return op->def.schema_text; }
const oc_library *oc_op_library(const oc_op *op) { return op->lib; }
const char *oc_op_kernel_name(const oc_op *op) { return op->def.kernel_name; }
const char *oc_op_shape_fn_name(const oc_op *op) { return op->def.shape_fn_name; }
const char *oc_op_kernel_prototype(const oc_op *op, char *buf, size_t len)
{
    oc__schema_prototype(&op->def.schema, op->def.kernel_name, buf, len);
    return buf;
}
bool oc_op_multicore(const oc_op *op) { return op->multicore; }
bool oc_op_strided(const oc_op *op) { return op->def.options.strided; }
size_t oc_op_stack_size(const oc_op *op) { return op->stack_size; }
int oc_op_num_args(const oc_op *op) { return op->def.schema.num_args; }

/* Out-of-range indices read argument 0's fields: the getters never crash
 * on a caller's off-by-one (and no op has 0 arguments and a caller asking). */
static const oc_schema_arg *arg_at(const oc_op *op, int index)
{
    static const oc_schema_arg none;
    if (index < 0 || index >= op->def.schema.num_args) return &none;
    return &op->def.schema.args[index];
}

oc_arg_type oc_op_arg_type(const oc_op *op, int index) { return arg_at(op, index)->type; }
const char *oc_op_arg_name(const oc_op *op, int index) { return arg_at(op, index)->name; }
const char *oc_op_arg_schema_type(const oc_op *op, int index) { return arg_at(op, index)->type_text; }
bool oc_op_arg_optional(const oc_op *op, int index) { return arg_at(op, index)->optional; }
bool oc_op_arg_mutable(const oc_op *op, int index) { return arg_at(op, index)->is_mutable; }
int64_t oc_op_arg_list_len(const oc_op *op, int index) { return arg_at(op, index)->list_len; }
bool oc_op_arg_keyword_only(const oc_op *op, int index) { return arg_at(op, index)->keyword_only; }

bool oc_op_arg_default(const oc_op *op, int index, oc_value *out)
{
    oc_value v;
    bool has = oc__schema_default(arg_at(op, index), &v);
    if (has && out) *out = v;
    return has;
}

int oc_op_num_results(const oc_op *op) { return op->num_results; }

int oc_op_result_alias(const oc_op *op, int index)
{
    if (index < 0 || index >= op->num_results) return -1;
    return op->def.schema.results[index].alias_arg;
}

const char *oc_op_result_name(const oc_op *op, int index)
{
    if (index < 0 || index >= op->num_results) return "";
    return op->def.schema.results[index].name;
}
