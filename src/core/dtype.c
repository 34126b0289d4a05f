/* Element type table. */
#include <string.h>

#include "opcore/dtype.h"

static const struct {
    const char *name;
    size_t size;
} dtype_table[OC_NUM_DTYPES] = {
    [OC_FLOAT32] = {"float32", 4}, [OC_FLOAT64] = {"float64", 8},
    [OC_FLOAT16] = {"float16", 2}, [OC_BFLOAT16] = {"bfloat16", 2},
    [OC_INT8] = {"int8", 1},       [OC_INT16] = {"int16", 2},
    [OC_INT32] = {"int32", 4},     [OC_INT64] = {"int64", 8},
    [OC_UINT8] = {"uint8", 1},     [OC_BOOL] = {"bool", 1},
};

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
    };
    for (int d = 0; d < OC_NUM_DTYPES; d++)
        if (strcmp(name, dtype_table[d].name) == 0) { *out = (oc_dtype)d; return true; }
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp(name, aliases[i].alias) == 0) { *out = aliases[i].dtype; return true; }
    return false;
}

bool oc_dtype_is_floating(oc_dtype dtype)
{
    return dtype == OC_FLOAT32 || dtype == OC_FLOAT64 || dtype == OC_FLOAT16 || dtype == OC_BFLOAT16;
}

bool oc_dtype_is_integral(oc_dtype dtype)
{
    return oc_dtype_is_valid(dtype) && !oc_dtype_is_floating(dtype);
}
