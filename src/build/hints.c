/* Errors that teach: the build tool's first-mistake checks and hints.
 *
 * A kernel author coming from the seeds' C++ operators makes the same few
 * mistakes; the compiler's or linker's own words for them ("invalid
 * initializer" inside a macro, "torch/torch.h: No such file", "multiple
 * definition of oc_library_entry") say what broke, not what to write. These
 * helpers recognise each case from the tool's output (or the options) and
 * say what to write instead. The build still shows the compiler's output
 * as it wrote it, after the hint.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "build/build_internal.h"

bool oc__is_cxx_source(const char *path)
{
    static const char *const exts[] = {".cpp", ".cc", ".cxx", ".c++", ".C", ".cu", ".hip", ".mm", ".cppm"};
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot || strchr(dot, '/')) return false;
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++)
        if (strcmp(dot, exts[i]) == 0) return true;
    return false;
}

const char *oc__library_file_stem(const char *name, char *buf, size_t len)
{
    if (!name) return name;
    size_t n = strlen(name);
    if (n > 3 && strcmp(name + n - 3, ".so") == 0) n -= 3;
    size_t skip = n > 3 && strncmp(name, "lib", 3) == 0 ? 3 : 0;
    if ((skip == 0 && name[n] == '\0') || n - skip + 1 > len) return name; /* nothing to strip */
    memcpy(buf, name + skip, n - skip);
    buf[n - skip] = '\0';
    return buf;
}

/* `text` holds `a` and, after it, `b` (a compiler note follows its error). */
static bool has_after(const char *text, const char *a, const char *b)
{
    const char *p = strstr(text, a);
    return p && strstr(p, b);
}

void oc__build_hints(const char *output, oc__sb *out)
{
    if (!output) return;
    if (strstr(output, "torch/torch.h") || strstr(output, "torch/extension.h") ||
        strstr(output, "ATen/") || strstr(output, "c10/") || strstr(output, "pybind11/")) {
        oc__sb_put(out, "hint: opcore kernels and shape functions are C, without torch's headers: "
                        "include <opcore/kernel.h> (kernels) or <opcore/library.h> (shape functions); "
                        "torch::Tensor is `const oc_tensor *`, accessors are oc_accessor/OC_AT. See "
                        "docs/tutorial_1_first_operator.md.\n");
    }
    if (has_after(output, "invalid initializer", "oc_accessor_of_a_const_tensor_is_an_oc_cacc") ||
        has_after(output, "incompatible types", "oc_cacc")) {
        oc__sb_put(out, "hint: oc_accessor of a `const oc_tensor *` (a kernel input) is a read-only "
                        "oc_cacc: write `oc_cacc a = oc_accessor(x, OC_FLOAT32, 2);` (oc_acc is for "
                        "writable tensors such as oc_dst_tensor()).\n");
    }
    /* without <complex.h>, `float complex z` declares a float named complex:
     * the compiler's error names the token after it, never the header */
    if (strstr(output, "error: expected") && (strstr(output, "float complex") || strstr(output, "double complex"))) {
        oc__sb_put(out, "hint: `float complex` and `double complex` need #include <complex.h> in the source "
                        "(or write float _Complex / double _Complex, or opcore's oc_complex64 / "
                        "oc_complex128 from <opcore/dtype.h>).\n");
    }
    if (strstr(output, "redefinition of") && strstr(output, "oc_library_entry")) {
        oc__sb_put(out, "hint: this source has two OC_LIBRARY blocks; a library has exactly one: put "
                        "every oc_def() in one block.\n");
    }
}

bool oc__two_library_blocks(const char *output, int *first, int *second)
{
    if (!output) return false;
    const char *p = strstr(output, "multiple definition of");
    if (!p || !strstr(p, "oc_library_entry")) return false;
    /* ld: .../N.o:(...): multiple definition of `oc_library_entry'; .../M.o:(...): first defined here */
    int found[2] = {-1, -1}, nf = 0;
    const char *line = p;
    while (line > output && line[-1] != '\n') line--;
    for (const char *q = line; *q && *q != '\n' && nf < 2; q++) {
        if (q[0] != '.' || q[1] != 'o' || q == line || !isdigit((unsigned char)q[-1])) continue;
        const char *d = q;
        while (d > line && isdigit((unsigned char)d[-1])) d--;
        if (d > line && d[-1] == '/') found[nf++] = atoi(d);
    }
    if (nf < 2) return false;
    *first = found[1]; /* "first defined here" names the earlier object */
    *second = found[0];
    return true;
}
