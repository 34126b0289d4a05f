/* src/library/load_hint.h — noticing an op library loaded without opcore
 * (internal).
 *
 * `torch.ops.load_library('librelu.so')` (or ctypes, or a bare dlopen) on an
 * opcore library loads it silently and registers nothing; the user then
 * meets "'_OpNamespace' 'my_ops' object has no attribute 'relu_forward'".
 * Every library built by `opcore build` runs a constructor (in its
 * generated build-info source) that calls oc_library_constructor; opcore's
 * own loaders bracket their dlopen with oc__loader_enter/leave, so the
 * constructor knows who loaded it and, for anyone else, says on stderr to
 * use opcore.custom_op.load_library.
 */
#ifndef OPCORE_LOAD_HINT_H
#define OPCORE_LOAD_HINT_H

/* Around a dlopen of an op library by opcore (on the calling thread, where
 * dlopen runs the library's constructors). */
void oc__loader_enter(void);
void oc__loader_leave(void);

/* oc_library_constructor (opcore/library.h, load_hint.c) prints the hint
 * unless opcore is the one loading the library. */

#endif /* OPCORE_LOAD_HINT_H */
