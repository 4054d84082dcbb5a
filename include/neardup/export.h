// NEARDUP_EXPORT: marks the classes and functions of the public API. The library is built with
// hidden symbol visibility (-fvisibility=hidden -fvisibility-inlines-hidden), so only what carries
// this mark is visible outside libneardup.so (and libneardup_service.so); everything else in
// src/ is internal and may change without notice.
#ifndef NEARDUP_EXPORT_H_
#define NEARDUP_EXPORT_H_

// A standard attribute (not __attribute__), so it combines with others: class [[nodiscard]]
// NEARDUP_EXPORT Status.
//
// NEARDUP_HIDDEN marks a class nested in an exported one that stays internal: the private `Impl`
// of a pimpl class, which would otherwise take its enclosing class's visibility, so that its
// out-of-line members were exported too.
#if defined(__GNUC__) || defined(__clang__)
#define NEARDUP_EXPORT [[gnu::visibility("default")]]
#define NEARDUP_HIDDEN [[gnu::visibility("hidden")]]
#else
#define NEARDUP_EXPORT
#define NEARDUP_HIDDEN
#endif

#endif  // NEARDUP_EXPORT_H_
