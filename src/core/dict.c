/* Dictionaries of named attributes (opcore/dict.h): lookups and checks.
 * Lookups search linearly (an op's settings are a handful of entries); the
 * check that no key appears twice is linear in the keys. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "opcore/dict.h"

const char *oc_dict_kind_name(oc_dict_kind kind)
{
    switch (kind) {
    case OC_DICT_INT: return "int";
    case OC_DICT_FLOAT: return "float";
    case OC_DICT_BOOL: return "bool";
    case OC_DICT_STR: return "str";
    case OC_DICT_INTS: return "int[]";
    case OC_DICT_FLOATS: return "float[]";
    }
    return "unknown";
}

int64_t oc_dict_size(const oc_dict *d) { return d ? d->count : 0; }

const oc_dict_entry *oc_dict_at(const oc_dict *d, int64_t index)
{
    return d && index >= 0 && index < d->count ? &d->entries[index] : NULL;
}

const oc_dict_entry *oc_dict_find(const oc_dict *d, const char *key)
{
    if (!d || !key) return NULL;
    for (int64_t k = 0; k < d->count; k++)
        if (d->entries[k].key && strcmp(d->entries[k].key, key) == 0) return &d->entries[k];
    return NULL;
}

bool oc_dict_has(const oc_dict *d, const char *key) { return oc_dict_find(d, key) != NULL; }

/* "op 'my_ops::f': argument 'attrs' (Dict)" or "Dict" when unnamed. */
static void where(const oc_dict *d, char *buf, size_t len)
{
    if (d && d->op && d->arg) snprintf(buf, len, "op '%s': argument '%s' (Dict)", d->op, d->arg);
    else snprintf(buf, len, "Dict");
}

static void keys_list(const oc_dict *d, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int64_t k = 0; d && k < d->count && n + 1 < len; k++)
        n += (size_t)snprintf(buf + n, len - n, "%s'%s'", k ? ", " : "", d->entries[k].key);
}

/* The entry `key` of kind `want` (or one of `also`), else an error. */
static const oc_dict_entry *lookup(const oc_dict *d, const char *key, oc_dict_kind want, int also, oc_status *st)
{
    char at[320];
    *st = OC_OK;
    if (!key) {
        where(d, at, sizeof at);
        *st = oc_set_error(OC_EINVAL, "%s: lookup with a NULL key", at);
        return NULL;
    }
    const oc_dict_entry *e = oc_dict_find(d, key);
    if (e && (e->kind == want || (int)e->kind == also)) return e;
    where(d, at, sizeof at);
    if (!e) {
        char keys[256];
        keys_list(d, keys, sizeof keys);
        *st = oc_set_error(OC_EINVAL, "%s: missing key '%s' (expected %s; the dictionary has %s%s)", at, key,
                           oc_dict_kind_name(want), d && d->count ? "keys " : "no keys", keys);
    } else {
        *st = oc_set_error(OC_EINVAL, "%s: key '%s': expected %s, got %s", at, key, oc_dict_kind_name(want),
                           oc_dict_kind_name(e->kind));
    }
    return NULL;
}

oc_status oc_dict_get_int(const oc_dict *d, const char *key, int64_t *out)
{
    oc_status st;
    const oc_dict_entry *e = lookup(d, key, OC_DICT_INT, -1, &st);
    if (e) *out = e->v.i;
    return st;
}

oc_status oc_dict_get_float(const oc_dict *d, const char *key, double *out)
{
    oc_status st;
    const oc_dict_entry *e = lookup(d, key, OC_DICT_FLOAT, OC_DICT_INT, &st);
    if (e) *out = e->kind == OC_DICT_INT ? (double)e->v.i : e->v.f;
    return st;
}

oc_status oc_dict_get_bool(const oc_dict *d, const char *key, bool *out)
{
    oc_status st;
    const oc_dict_entry *e = lookup(d, key, OC_DICT_BOOL, -1, &st);
    if (e) *out = e->v.b;
    return st;
}

oc_status oc_dict_get_str(const oc_dict *d, const char *key, const char **out)
{
    oc_status st;
    const oc_dict_entry *e = lookup(d, key, OC_DICT_STR, -1, &st);
    if (e) *out = e->v.s;
    return st;
}

/* An empty list has no item kind: it is both an int[] and a float[]. */
static bool empty_list(const oc_dict *d, const char *key)
{
    const oc_dict_entry *e = oc_dict_find(d, key);
    return e && ((e->kind == OC_DICT_INTS && e->v.ints.count == 0) ||
                 (e->kind == OC_DICT_FLOATS && e->v.floats.count == 0));
}

oc_status oc_dict_get_ints(const oc_dict *d, const char *key, oc_int_list *out)
{
    if (empty_list(d, key)) {
        *out = (oc_int_list){0, NULL};
        return OC_OK;
    }
    oc_status st;
    const oc_dict_entry *e = lookup(d, key, OC_DICT_INTS, -1, &st);
    if (e) *out = e->v.ints;
    return st;
}

oc_status oc_dict_get_floats(const oc_dict *d, const char *key, oc_float_list *out)
{
    if (empty_list(d, key)) {
        *out = (oc_float_list){0, NULL};
        return OC_OK;
    }
    oc_status st;
    const oc_dict_entry *e = lookup(d, key, OC_DICT_FLOATS, -1, &st);
    if (e) *out = e->v.floats;
    return st;
}

static oc_status twice(const oc_dict *d, const char *at, int64_t j, int64_t k)
{
    return oc_set_error(OC_EINVAL, "%s: key '%s' appears twice (entries %lld and %lld)", at, d->entries[k].key,
                        (long long)j, (long long)k);
}

static uint64_t key_hash(const char *s) /* FNV-1a */
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* No key twice: pairwise for a handful of entries, else one pass through
 * an open-addressing table of entry indices (linear in the keys: a Dict
 * of 100k keys is checked in milliseconds, not minutes). */
static oc_status no_twice(const oc_dict *d, const char *at)
{
    if (d->count <= 16) {
        for (int64_t k = 1; k < d->count; k++)
            for (int64_t j = 0; j < k; j++)
                if (strcmp(d->entries[j].key, d->entries[k].key) == 0) return twice(d, at, j, k);
        return OC_OK;
    }
    size_t cap = 32;
    while (cap < (size_t)d->count * 2) cap *= 2;
    int64_t *slot = oc__malloc(cap * sizeof *slot);
    if (!slot) return oc_set_error(OC_ENOMEM, "%s: out of memory checking %lld keys", at, (long long)d->count);
    memset(slot, 0xff, cap * sizeof *slot); /* -1: empty */
    oc_status st = OC_OK;
    for (int64_t k = 0; k < d->count && st == OC_OK; k++) {
        size_t h = (size_t)key_hash(d->entries[k].key) & (cap - 1);
        for (; slot[h] >= 0; h = (h + 1) & (cap - 1))
            if (strcmp(d->entries[slot[h]].key, d->entries[k].key) == 0) {
                st = twice(d, at, slot[h], k);
                break;
            }
        slot[h] = k;
    }
    oc__free(slot);
    return st;
}

oc_status oc_dict_validate(const oc_dict *d)
{
    char at[320];
    where(d, at, sizeof at);
    if (!d) return oc_set_error(OC_EINVAL, "%s: expected a dictionary, got NULL", at);
    if (d->count < 0 || (d->count > 0 && !d->entries))
        return oc_set_error(OC_EINVAL, "%s: %lld entries with no entry array", at, (long long)d->count);
    for (int64_t k = 0; k < d->count; k++) {
        const oc_dict_entry *e = &d->entries[k];
        if (!e->key) return oc_set_error(OC_EINVAL, "%s: entry %lld has a NULL key", at, (long long)k);
        bool ok;
        switch (e->kind) {
        case OC_DICT_INT: case OC_DICT_FLOAT: case OC_DICT_BOOL: ok = true; break;
        case OC_DICT_STR: ok = e->v.s != NULL; break;
        case OC_DICT_INTS: ok = e->v.ints.count >= 0 && (e->v.ints.count == 0 || e->v.ints.values); break;
        case OC_DICT_FLOATS: ok = e->v.floats.count >= 0 && (e->v.floats.count == 0 || e->v.floats.values); break;
        default:
            return oc_set_error(OC_EINVAL, "%s: key '%s' has an unknown kind %d", at, e->key, (int)e->kind);
        }
        if (!ok)
            return oc_set_error(OC_EINVAL, "%s: key '%s' (%s) has no value (NULL)", at, e->key,
                                oc_dict_kind_name(e->kind));
    }
    return no_twice(d, at);
}
