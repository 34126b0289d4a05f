/* opcore/export.h — what libopcore exports.
 *
 * libopcore is built with -fvisibility=hidden: only declarations marked
 * OC_API (the oc_ calls of these headers) are exported from the shared
 * library; everything else (the runtime's oc__ internals) stays inside it,
 * so hosts and op libraries can link only the documented API. A declaration
 * without OC_API in a public header is a bug: its symbol would be missing
 * from libopcore.so at link time.
 */
#ifndef OPCORE_EXPORT_H
#define OPCORE_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define OC_API __attribute__((visibility("default")))
#else
#define OC_API
#endif

#endif /* OPCORE_EXPORT_H */
