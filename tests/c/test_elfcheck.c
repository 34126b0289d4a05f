/* The loader's file checks (src/library/elfcheck.c): a real library built
 * by `opcore build`, truncated at many lengths and with random bit flips,
 * is refused with a clear error before dlopen ever sees it; an empty file
 * says it is empty; the intact file still loads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "support/runner.h"

#include "opcore/engine.h"
#include "opcore/host.h"
#include "support/oplib.h"

static const char *shape_src =
    "#include <opcore/library.h>\n"
    "static oc_tensor *same(const oc_tensor *x) { return oc_empty_like(x); }\n"
    "OC_LIBRARY(elfc, m) { oc_def(m, \"twice(Tensor x) -> Tensor\", same, \"twice\"); }\n";
static const char *compute_src =
    "#include <opcore/kernel.h>\n"
    "oc_tensor *twice(const oc_tensor *x) { oc_tensor *o = oc_dst_tensor();\n"
    "  for (int64_t i = 0; i < oc_numel(x); i++) ((float *)o->data)[i] = 2 * ((const float *)x->data)[i];\n"
    "  return o; }\n";

static unsigned char *lib_bytes;
static size_t lib_size;

static void write_bytes(const char *path, const unsigned char *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    oc_status st;
    const char *path = test_build("elfc", compute_src, shape_src, (test_lib_options){0}, &st);
    if (!path) fail_msg("build: %s", oc_errmsg());
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    lib_size = (size_t)ftell(f);
    rewind(f);
    lib_bytes = malloc(lib_size);
    assert_int_equal(fread(lib_bytes, 1, lib_size, f), lib_size);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(lib_bytes);
    oc_engine_shutdown();
    return 0;
}

/* A path in this process's scratch dir, for the bytes a test loads. */
static const char *scratch(const char *leaf)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", test_tmpdir(), leaf);
    return path;
}

/* Load `n` bytes as a library: it must be refused with a file error. */
static void refused(const char *path, const unsigned char *b, size_t n, const char *what)
{
    write_bytes(path, b, n);
    oc_library *lib = NULL;
    oc_status st = oc_library_load(path, &lib);
    if (st == OC_OK) fail_msg("%s was loaded", what);
    assert_null(lib);
    if (st != OC_EIO && st != OC_EABI) fail_msg("%s: %s: %s", what, oc_status_name(st), oc_errmsg());
    if (!strstr(oc_errmsg(), path)) fail_msg("%s: the message does not name the file: %s", what, oc_errmsg());
}

static void test_intact_loads(void **state)
{
    (void)state;
    const char *path = scratch("intact.so");
    write_bytes(path, lib_bytes, lib_size);
    oc_library *lib = NULL;
    if (oc_library_load(path, &lib) != OC_OK) fail_msg("%s", oc_errmsg());
    float xv[3] = {1, 2, 3};
    oc_tensor x, *y = NULL;
    oc_tensor_init(&x, xv, OC_FLOAT32, 1, (int64_t[]){3});
    oc_value a[] = {oc_value_tensor(&x)};
    assert_int_equal(oc_op_invoke(oc_op_find("elfc::twice"), a, 1, &y), OC_OK);
    assert_true(((float *)y->data)[2] == 6.0f);
    oc_tensor_free(y);
    assert_int_equal(oc_library_unload(lib), OC_OK);
}

static void test_empty_file(void **state)
{
    (void)state;
    refused(scratch("empty.so"), lib_bytes, 0, "an empty file");
    assert_int_equal(oc_errcode(), OC_EIO);
    assert_non_null(strstr(oc_errmsg(), "empty"));
}

static void test_not_elf(void **state)
{
    (void)state;
    refused(scratch("script.so"), (const unsigned char *)"#!/bin/sh\necho hi\n", 18, "a script");
    assert_non_null(strstr(oc_errmsg(), "not a shared library"));
}

static void test_truncations(void **state)
{
    (void)state;
    const char *path = scratch("truncated.so");
    int tried = 0;
    for (size_t n = 1; n < lib_size; n += n < 128 ? 1 : n < 4096 ? 61 : 997, tried++)
        refused(path, lib_bytes, n, "a truncated library");
    printf("elfcheck: %d truncations refused\n", tried);
}

static void test_last_byte_missing(void **state)
{
    (void)state;
    refused(scratch("truncated.so"), lib_bytes, lib_size - 1, "a library missing its last byte");
}

static void test_bit_flips(void **state)
{
    (void)state;
    const char *path = scratch("flipped.so");
    unsigned char *b = malloc(lib_size);
    uint64_t seed = 0x9E3779B97F4A7C15u;
    int flips = getenv("OC_UNDER_VALGRIND") ? 40 : 400;
    for (int i = 0; i < flips; i++) {
        memcpy(b, lib_bytes, lib_size);
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        size_t at = (size_t)(seed >> 33) % lib_size;
        /* the first flips hit the ELF header, where the loader looks first */
        if (i < 64) at = (size_t)i;
        b[at] ^= (unsigned char)(1u << ((seed >> 29) & 7));
        refused(path, b, lib_size, "a bit-flipped library");
    }
    free(b);
    printf("elfcheck: %d bit flips refused\n", flips);
}

/* an unsealed copy (the trailer cut off) is refused too */
static void test_unsealed(void **state)
{
    (void)state;
    refused(scratch("flipped.so"), lib_bytes, lib_size - 32, "an unsealed library");
    assert_non_null(strstr(oc_errmsg(), "no checksum"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_intact_loads),
        cmocka_unit_test(test_empty_file),
        cmocka_unit_test(test_not_elf),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_last_byte_missing),
        cmocka_unit_test(test_bit_flips),
        cmocka_unit_test(test_unsealed),
    };
    return oc_test_run("elfcheck", tests, setup, teardown);
}
