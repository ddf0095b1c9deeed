/*
 * zeroc/types.h - element types, reduction operators, offload and device
 * choices shared by the API.
 */
#ifndef ZEROC_TYPES_H
#define ZEROC_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "zeroc/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * "Unset": the value the config initializers (ZEROC_SHARD_CONFIG_INIT,
 * ZEROC_PIPELINE_CONFIG_INIT) give a field whose default the library decides;
 * the library replaces it by the default when the object is created, so a
 * default can change without recompiling the caller. An int field holds
 * ZEROC_UNSET, a float field (float)ZEROC_UNSET, a uint64_t field
 * (uint64_t)ZEROC_UNSET, an enum field its *_UNSET or *_DEFAULT value. It is
 * INT_MIN: never a meaningful setting.
 */
#define ZEROC_UNSET (-2147483647 - 1)

typedef enum zeroc_dtype {
  ZEROC_DTYPE_UNSET = ZEROC_UNSET, /* a config's "unset" (the library picks); not a type */
  ZEROC_FP32 = 0,
  ZEROC_BF16 = 1,
  ZEROC_INT32 = 2,
  ZEROC_FP64 = 3,
  ZEROC_UINT8 = 4,
  ZEROC_INT64 = 5,
  ZEROC_DTYPE_COUNT
} zeroc_dtype_t;

typedef enum zeroc_redop {
  ZEROC_SUM = 0,
  ZEROC_AVG = 1, /* sum divided by the group size */
  ZEROC_MAX = 2,
  ZEROC_MIN = 3,
  ZEROC_REDOP_COUNT
} zeroc_redop_t;

/* Where state that does not have to live on the device is kept. */
typedef enum zeroc_offload {
  ZEROC_OFFLOAD_NONE = 0, /* on the device */
  ZEROC_OFFLOAD_CPU = 1,  /* pinned host memory */
  ZEROC_OFFLOAD_NVME = 2, /* files on NVMe (io_uring) */
} zeroc_offload_t;

/* The device backend a context runs on. */
typedef enum zeroc_device_kind {
  ZEROC_DEVICE_AUTO = 0, /* cuda when a GPU is visible, else cpu */
  ZEROC_DEVICE_CPU = 1,
  ZEROC_DEVICE_CUDA = 2,
} zeroc_device_kind_t;

/* Bytes per element of `dt` (0 for an unknown value). */
ZEROC_API size_t zeroc_dtype_size(zeroc_dtype_t dt);
/* "fp32", "bf16", "int32", "fp64", "uint8", "int64"; "?" for an unknown value. */
ZEROC_API const char *zeroc_dtype_name(zeroc_dtype_t dt);

/* bf16 <-> fp32, round to nearest even (NaN stays NaN). */
static inline uint16_t zeroc_f32_to_bf16(float f) {
  union { float f; uint32_t u; } v = {f};
  if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((v.u >> 16) & 1u);
  return (uint16_t)((v.u + rounding) >> 16);
}
static inline float zeroc_bf16_to_f32(uint16_t h) {
  union { uint32_t u; float f; } v = {(uint32_t)h << 16};
  return v.f;
}

/* How a rule's message names the settings (zeroc_train_config_resolve,
 * zeroc_plan_config_check). */
typedef enum zeroc_names {
  ZEROC_NAMES_CONFIG = 0, /* the config's fields: "tp 3 must divide the 4 attention heads" */
  ZEROC_NAMES_FLAGS = 1,  /* the command's flags: "--tp 3 must divide ... (--heads)" */
} zeroc_names_t;

#ifdef __cplusplus
}
#endif
#endif
