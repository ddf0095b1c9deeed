/*
 * zeroc/export.h - ZEROC_API marks the functions libzeroc.so exports. The library
 * is compiled with hidden visibility, so a function of include/zeroc/ without
 * ZEROC_API stays inside it; the linker version script (cmake/zeroc.map, node
 * ZEROC_0.1) names every exported one as well.
 */
#ifndef ZEROC_EXPORT_H
#define ZEROC_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define ZEROC_API __attribute__((visibility("default")))
#else
#define ZEROC_API
#endif

#endif
