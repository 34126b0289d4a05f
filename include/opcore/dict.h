/* opcore/dict.h — a dictionary of named attributes (schema type `Dict`).
 *
 * An op that takes a variable set of named settings declares a `Dict`
 * argument and reads it with typed lookups:
 *
 *     // schema: "scale_all(Tensor x, Dict attrs) -> Tensor"
 *     oc_tensor *scale_all(const oc_tensor *x, const oc_dict *attrs)
 *     {
 *         double scale;
 *         OC_CHECK_OK(oc_dict_get_float(attrs, "scale", &scale));
 *         ...
 *
 * A missing key or a value of another kind is an error (OC_EINVAL) whose
 * message (oc_errmsg) names the op, the argument, the key, the kind
 * expected and the kind given; OC_CHECK_OK (opcore/check.h) fails the
 * kernel or shape function with it, so the caller gets that message.
 *
 * Values are int (int64), float (double), bool, str, int[] and float[].
 * oc_dict_get_float also takes an int entry (converted, as float arguments
 * take ints); an empty list is both an int[] and a float[]. The entries
 * and everything they point at stay valid for the call only. From JAX the
 * keys come sorted (MLIR sorts dictionary attributes); from Python and C
 * they keep the caller's order. Keys are unique.
 */
#ifndef OPCORE_DICT_H
#define OPCORE_DICT_H

#include <stdbool.h>
#include <stdint.h>

#include "args.h"
#include "export.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum oc_dict_kind {
    OC_DICT_INT = 0,    /* int64_t        */
    OC_DICT_FLOAT = 1,  /* double         */
    OC_DICT_BOOL = 2,   /* bool           */
    OC_DICT_STR = 3,    /* const char *   */
    OC_DICT_INTS = 4,   /* oc_int_list    */
    OC_DICT_FLOATS = 5  /* oc_float_list  */
} oc_dict_kind;

typedef struct oc_dict_entry {
    const char *key;
    oc_dict_kind kind;
    union {
        int64_t i;
        double f;
        bool b;
        const char *s;
        oc_int_list ints;
        oc_float_list floats;
    } v;
} oc_dict_entry;

/* A host builds one from an array of entries (oc_dict_of) and passes it
 * with oc_value_dict; `op` and `arg` name where it came from in error
 * messages: opcore sets them on the copy a kernel receives. */
typedef struct oc_dict {
    int64_t count;
    const oc_dict_entry *entries;
    const char *op;  /* "my_ops::f", or NULL */
    const char *arg; /* "attrs", or NULL */
} oc_dict;

static inline oc_dict oc_dict_of(const oc_dict_entry *entries, int64_t count)
{ oc_dict d; d.count = count; d.entries = entries; d.op = 0; d.arg = 0; return d; }
static inline oc_dict_entry oc_dict_int(const char *key, int64_t i)
{ oc_dict_entry e; e.key = key; e.kind = OC_DICT_INT; e.v.i = i; return e; }
static inline oc_dict_entry oc_dict_float(const char *key, double f)
{ oc_dict_entry e; e.key = key; e.kind = OC_DICT_FLOAT; e.v.f = f; return e; }
static inline oc_dict_entry oc_dict_bool(const char *key, bool b)
{ oc_dict_entry e; e.key = key; e.kind = OC_DICT_BOOL; e.v.b = b; return e; }
static inline oc_dict_entry oc_dict_str(const char *key, const char *s)
{ oc_dict_entry e; e.key = key; e.kind = OC_DICT_STR; e.v.s = s; return e; }
static inline oc_dict_entry oc_dict_ints(const char *key, const int64_t *values, int64_t count)
{ oc_dict_entry e; e.key = key; e.kind = OC_DICT_INTS; e.v.ints.values = values; e.v.ints.count = count; return e; }
static inline oc_dict_entry oc_dict_floats(const char *key, const double *values, int64_t count)
{ oc_dict_entry e; e.key = key; e.kind = OC_DICT_FLOATS; e.v.floats.values = values; e.v.floats.count = count; return e; }

/* "int", "float", "bool", "str", "int[]", "float[]". */
OC_API const char *oc_dict_kind_name(oc_dict_kind kind);

/* Number of entries; entry `index` (0 .. size-1) for iteration, or NULL. */
OC_API int64_t oc_dict_size(const oc_dict *d);
OC_API const oc_dict_entry *oc_dict_at(const oc_dict *d, int64_t index);

/* The entry named `key`, or NULL (no error set). */
OC_API const oc_dict_entry *oc_dict_find(const oc_dict *d, const char *key);
OC_API bool oc_dict_has(const oc_dict *d, const char *key);

/* Typed lookups: OC_OK and *out, or OC_EINVAL (missing key, other kind)
 * with a message naming op, argument, key, expected and given kind. */
OC_API oc_status oc_dict_get_int(const oc_dict *d, const char *key, int64_t *out);
OC_API oc_status oc_dict_get_float(const oc_dict *d, const char *key, double *out);
OC_API oc_status oc_dict_get_bool(const oc_dict *d, const char *key, bool *out);
OC_API oc_status oc_dict_get_str(const oc_dict *d, const char *key, const char **out);
OC_API oc_status oc_dict_get_ints(const oc_dict *d, const char *key, oc_int_list *out);
OC_API oc_status oc_dict_get_floats(const oc_dict *d, const char *key, oc_float_list *out);

/* Check a dictionary a caller built: non-NULL keys, known kinds, lists
 * with values, unique keys. OC_OK, or OC_EINVAL naming what is wrong
 * (op and arg are used in the message when set). */
OC_API oc_status oc_dict_validate(const oc_dict *d);

#ifdef __cplusplus
}
#endif
#endif /* OPCORE_DICT_H */
