/* tests/isolation/shape.c — shape functions (cases how >= 100) and the
 * OC_LIBRARY block (case $OC_ISO_REGISTER). Built as ISO_NAME (default
 * iso): -DISO_NAME=... gives a second library from the same source. */
#include <stdlib.h>

#include <opcore/library.h>

#include "misbehave.h"

jmp_buf iso_shape_buf, iso_kernel_buf;

static oc_tensor *misbehave_shape(const oc_tensor *x, int64_t how, int64_t arg)
{
    if (how >= 100) iso_misbehave(how - 100, arg, iso_shape_buf, iso_kernel_buf);
    /* the kernel's jump "to the other side" lands on this call's shape frame */
    if ((how == ISO_LONGJMP_OTHER || how == ISO_SIGLONGJMP_OTHER) && setjmp(iso_shape_buf))
        OC_CHECK(0, "a kernel's longjmp reached the shape function's jmp_buf");
    OC_CHECK(x->dtype == OC_FLOAT32 && x->ndim == 1, "want a 1-D float32 tensor");
    return oc_empty_like(x);
}

static oc_tensor *overrun_shape(const oc_tensor *x, int64_t arg)
{
    (void)arg;
    return oc_empty_like(x);
}

static void overrun2_shape(const oc_tensor *x, int64_t arg)
{
    (void)arg;
    oc_set_result(0, oc_empty_like(x));
    oc_set_result(1, oc_empty_like(x));
}

#ifndef ISO_NAME
#define ISO_NAME iso
#endif
#define ISO_LIBRARY(name, m) OC_LIBRARY(name, m)

ISO_LIBRARY(ISO_NAME, m)
{
    const char *reg = getenv("OC_ISO_REGISTER");
    if (reg && *reg) iso_misbehave(atoi(reg), 0, iso_shape_buf, iso_kernel_buf);
    oc_def(m, "misbehave(Tensor x, int how, int arg=0) -> Tensor", misbehave_shape, "misbehave");
    oc_def(m, "overrun(Tensor x, int arg) -> Tensor", overrun_shape, "overrun");
    oc_def(m, "overrun2(Tensor x, int arg) -> (Tensor a, Tensor b)", overrun2_shape, "overrun2");
    oc_def(m, "double_(Tensor(a!) x) -> Tensor(a!)", NULL, "double_");
}
