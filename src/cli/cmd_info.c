/* opcore info — what a built library holds. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "opcore/host.h"

static const char usage[] =
    "usage: opcore info [--json] LIB.so\n"
    "\n"
    "Load an op library and show its name, path, build settings (multicore, kernel\n"
    "stack size, compute flags) and each op with its schema, its kernel's C\n"
    "prototype and its shape function.\n"
    "\n"
    "options:\n"
    "  -j, --json   print the same as one JSON object\n"
    "  -h, --help   show this help\n";

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') fputs("\\n", stdout);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

int cli_info(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, 'j'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    bool json = false;
    opterr = 0;
    optind = 1;
    for (;;) {
        optopt = 0;
        int c = getopt_long(argc, argv, ":jh", opts, NULL);
        if (c == -1) break;
        switch (c) {
        case 'j': json = true; break;
        case 'h': fputs(usage, stdout); return CLI_OK;
        default: return cli_usage_error("info", "unrecognized option '%s'", cli_bad_option(argc, argv));
        }
    }
    if (optind >= argc) return cli_usage_error("info", "missing the library (LIB.so)");
    if (optind + 1 < argc) return cli_usage_error("info", "unexpected argument '%s'", argv[optind + 1]);
    oc_library *lib;
    if (oc_library_load(argv[optind], &lib) != OC_OK) {
        fprintf(stderr, "opcore info: %s\n", oc_errmsg());
        return CLI_FAIL;
    }
    int n = oc_library_num_ops(lib);
    if (json) {
        printf("{\"name\": ");
        json_str(oc_library_name(lib));
        printf(", \"path\": ");
        json_str(oc_library_path(lib));
        printf(", \"multicore\": %s, \"stack_size\": %zu, \"cflags\": ",
               oc_library_multicore(lib) ? "true" : "false", oc_library_stack_size(lib));
        json_str(oc_library_cflags(lib));
        printf(", \"ops\": [");
    } else {
        printf("library     %s\n", oc_library_name(lib));
        printf("path        %s\n", oc_library_path(lib));
        printf("multicore   %s\n", oc_library_multicore(lib) ? "yes (the default of its ops)" : "no (the default of its ops)");
        printf("stack size  %zu bytes\n", oc_library_stack_size(lib));
        printf("cflags      %s\n", oc_library_cflags(lib));
        printf("ops         %d\n", n);
    }
    for (int i = 0; i < n; i++) {
        const oc_op *op = oc_library_op(lib, i);
        char proto[2048];
        oc_op_kernel_prototype(op, proto, sizeof proto);
        if (json) {
            printf("%s{\"name\": ", i ? ", " : "");
            json_str(oc_op_qualname(op));
            printf(", \"schema\": ");
            json_str(oc_op_schema(op));
            printf(", \"kernel\": ");
            json_str(oc_op_kernel_name(op));
            printf(", \"prototype\": ");
            json_str(proto);
            printf(", \"shape_fn\": ");
            json_str(oc_op_shape_fn_name(op));
            printf(", \"multicore\": %s, \"stack_size\": %zu}", oc_op_multicore(op) ? "true" : "false",
                   oc_op_stack_size(op));
        } else {
            printf("\n  %s\n", oc_op_qualname(op));
            printf("    schema  %s\n", oc_op_schema(op));
            printf("    kernel  %s;\n", proto);
            printf("    shape   %s\n", oc_op_shape_fn_name(op)[0] ? oc_op_shape_fn_name(op) : "(none: no new results)");
            printf("    cores   %s\n", oc_op_multicore(op) ? "all (multicore)" : "one");
            if (oc_op_stack_size(op) != oc_library_stack_size(lib))
                printf("    stack   %zu bytes\n", oc_op_stack_size(op));
        }
    }
    if (json) printf("]}\n");
    return CLI_OK;
}
