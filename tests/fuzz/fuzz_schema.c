/* libFuzzer target: the op-schema parser (src/library/schema.c). Text in,
 * parse, describe what parsed, free: no input may crash, leak, or trip
 * ASan/UBSan. Run by `make test-fuzz` (bounded) and `make fuzz` (long). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "library/schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1); /* the parser takes a C string */
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    oc_schema s;
    memset(&s, 0, sizeof s);
    if (oc__schema_parse(text, &s) == OC_OK) {
        char proto[8192];
        oc__schema_prototype(&s, "kernel", proto, sizeof proto);
    }
    /* oc_schema owns no memory today; should it come to, free it here. */
    free(text);
    return 0;
}
