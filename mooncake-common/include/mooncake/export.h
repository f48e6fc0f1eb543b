/* Symbol visibility for the public C API. Everything is hidden by default (-fvisibility=hidden);
 * only declarations marked MC_API are exported from the shared libraries. */
#ifndef MOONCAKE_EXPORT_H
#define MOONCAKE_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define MC_API __attribute__((visibility("default")))
#else
#define MC_API
#endif

#endif
