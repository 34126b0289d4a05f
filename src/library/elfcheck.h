/* src/library/elfcheck.h — checking an op library file before dlopen
 * (internal).
 *
 * dlopen trusts the file: a truncated or bit-flipped library can make the
 * dynamic loader read or write out of bounds (SIGBUS, SIGSEGV inside
 * dlopen, where no guard can help) or run a corrupt constructor. So
 * `opcore build` seals every library it makes with a checksum trailer, and
 * the loader checks the file first: the ELF header and tables are sane and
 * inside the file, the class and machine are this process's, it has
 * opcore's build info for this ABI, and the checksum matches. */
#ifndef OPCORE_LIBRARY_ELFCHECK_H
#define OPCORE_LIBRARY_ELFCHECK_H

#include <stddef.h>

#include "opcore/status.h"

/* Check the library file at `path`; messages name it as `shown`. Returns
 * OC_OK, OC_EIO (empty, truncated, corrupt) or OC_EABI (not an op library
 * of this machine and ABI), with the error set. */
oc_status oc__elf_check_file(const char *path, const char *shown);

/* The same checks on the file's bytes (the fuzzer's entry point). */
oc_status oc__elf_check(const unsigned char *data, size_t size, const char *shown);

/* Append the checksum trailer (what `opcore build` does after linking). */
oc_status oc__elf_seal(const char *path);

#endif /* OPCORE_LIBRARY_ELFCHECK_H */
