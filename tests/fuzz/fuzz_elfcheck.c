/* libFuzzer target: the op-library file checks that run before dlopen
 * (src/library/elfcheck.c). Any bytes must give OC_OK or an error, never a
 * crash or an out-of-bounds read (ASan/UBSan). The seed corpus holds a
 * real library built by `opcore build`, so the fuzzer starts from valid
 * ELF and mutates its header and tables. */
#include <stddef.h>
#include <stdint.h>

#include "library/elfcheck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libFuzzer hands over a heap copy of exactly `size` bytes, as the loader
 * checks one: ASan sees any read past the end. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)oc__elf_check(data, size, "fuzz.so");
    return 0;
}
