/* libFuzzer target: the op-library file checks that run before dlopen
 * (src/library/elfcheck.c). Any bytes must give OC_OK or an error, never a
 * crash or an out-of-bounds read (ASan/UBSan). The seed corpus holds a
 * real library built by `opcore build`, so the fuzzer starts from valid
 * ELF and mutates its header and tables. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "library/elfcheck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the loader checks a malloc'ed copy of the file: the same here */
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    (void)oc__elf_check(copy, size, "fuzz.so");
    free(copy);
    return 0;
}
