/* opcore new — start an op project (the files: src/build/templates/). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "opcore/build.h"

static const char new_usage[] =
    "usage: opcore new [--package] NAME [DIR]\n"
    "\n"
    "Write a small op project into DIR (default ./NAME): an op library NAME with one\n"
    "operator, NAME::scale_add(Tensor x, Tensor y, float alpha=1.0) -> Tensor:\n"
    "  kernel.c        the kernel (broadcasting, any strides, vectorised, multicore-ready)\n"
    "  shape.c         its shape function and the OC_LIBRARY registration\n"
    "  test_NAME.c     a C test through the host API\n"
    "  test_NAME.py    a Python test through torch.ops.NAME\n"
    "  Makefile        `make` builds build/libNAME.so, `make test` runs both tests\n"
    "  README.md\n"
    "With --package: the same op as a pip package whose wheel carries the prebuilt\n"
    "library (docs/packaging.md):\n"
    "  csrc/kernel.c, csrc/shape.c\n"
    "  setup.py        OpLibrary + BuildOpLibraries (opcore.setuptools)\n"
    "  pyproject.toml\n"
    "  NAME/__init__.py  `import NAME` loads the library: opcore.load_packaged(__name__)\n"
    "  tests/test_NAME.py  its ops from PyTorch and JAX (see the next step printed)\n"
    "  README.md\n"
    "NAME must be a C identifier. Nothing is overwritten.\n";

int cli_new(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(new_usage, stdout);
        return CLI_OK;
    }
    bool package = argc > 1 && strcmp(argv[1], "--package") == 0;
    if (package) argc--, argv++;
    if (argc > 1 && argv[1][0] == '-') return cli_usage_error("new", "unrecognized option '%s'", argv[1]);
    if (argc < 2) return cli_usage_error("new", "expected the project's NAME");
    if (argc > 3) return cli_usage_error("new", "unexpected argument '%s'", argv[3]);
    const char *name = argv[1], *dir = argc > 2 ? argv[2] : argv[1];
    if ((package ? oc_new_package(dir, name) : oc_new_project(dir, name)) != OC_OK) {
        fprintf(stderr, "%s\n", oc_errmsg());
        return oc_errcode() == OC_EINVAL ? CLI_USAGE : CLI_FAIL;
    }
    if (package) {
        printf("wrote %s/: csrc/kernel.c csrc/shape.c setup.py pyproject.toml %s/__init__.py tests/test_%s.py "
               "README.md\n"
               "next: cd %s && python -m pip install --no-build-isolation \".[test]\" "
               "&& cd tests && python -m pytest -q\n"
               "(with the Python that has opcore: --no-build-isolation lets the build use it; "
               "the tests run from tests/,\n where the source folder does not hide the "
               "installed package)\n",
               dir, name, name, dir);
        return CLI_OK;
    }
    printf("wrote %s/: kernel.c shape.c test_%s.c test_%s.py Makefile README.md\n"
           "next: cd %s && make test\n", dir, name, name, dir);
    return CLI_OK;
}
