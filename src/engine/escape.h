/* src/engine/escape.h — the libc calls an op library is relinked away
 * from (internal; the wrappers are in escape.c). */
#ifndef OPCORE_ENGINE_ESCAPE_H
#define OPCORE_ENGINE_ESCAPE_H

/* The linker flag `opcore build` links every op library with: its calls
 * to these reach __wrap_<name> in libopcore, which ends a guarded kernel,
 * shape function or OC_LIBRARY block with an error instead. */
#define OC_ESCAPE_WRAPS                                                             \
    "-Wl,--wrap=exit,--wrap=_exit,--wrap=_Exit,--wrap=quick_exit,--wrap=abort,"     \
    "--wrap=__assert_fail,--wrap=pthread_exit,--wrap=thrd_exit,--wrap=longjmp,"      \
    "--wrap=_longjmp,--wrap=siglongjmp,--wrap=__longjmp_chk"

#endif /* OPCORE_ENGINE_ESCAPE_H */
