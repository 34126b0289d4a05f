/* Element type table, from OC_DTYPE_MAP (opcore/dtype.h). */
#include <string.h>

#include "opcore/dtype.h"

#define OC_DTYPE_ROW_(NAME, name, code, bytes, kind, ...) [code] = {name, bytes, kind},
static const struct {
    const char *name;
    size_t size;
    int kind; /* 0 integral, 1 floating, 2 complex */
} dtype_table[OC_NUM_DTYPES] = {OC_DTYPE_MAP(OC_DTYPE_ROW_)};

bool oc_dtype_is_valid(oc_dtype dtype) { return (unsigned)dtype < OC_NUM_DTYPES; }

size_t oc_dtype_size(oc_dtype dtype)
{
    return oc_dtype_is_valid(dtype) ? dtype_table[dtype].size : 0;
}

const char *oc_dtype_name(oc_dtype dtype)
{
    return oc_dtype_is_valid(dtype) ? dtype_table[dtype].name : "invalid";
}

bool oc_dtype_from_name(const char *name, oc_dtype *out)
{
    static const struct { const char *alias; oc_dtype dtype; } aliases[] = {
        {"float", OC_FLOAT32}, {"double", OC_FLOAT64}, {"half", OC_FLOAT16},
        {"int", OC_INT32},     {"long", OC_INT64},     {"short", OC_INT16},
        {"cfloat", OC_COMPLEX64}, {"cdouble", OC_COMPLEX128}, /* torch's aliases */
    };
    for (int d = 0; d < OC_NUM_DTYPES; d++)
        if (strcmp(name, dtype_table[d].name) == 0) { *out = (oc_dtype)d; return true; }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0) { *out = aliases[i].dtype; return true; }
    return false;
}

bool oc_dtype_is_floating(oc_dtype dtype)
{
    return oc_dtype_is_valid(dtype) && dtype_table[dtype].kind == 1;
}

bool oc_dtype_is_integral(oc_dtype dtype)
{
    return oc_dtype_is_valid(dtype) && dtype_table[dtype].kind == 0;
}

bool oc_dtype_is_complex(oc_dtype dtype)
{
    return oc_dtype_is_valid(dtype) && dtype_table[dtype].kind == 2;
}
