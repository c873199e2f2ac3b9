/* The functions of lodestar_core.h: version, status names, dtype and metric names, default
 * limits (in common/, so that every part may use them). */
#include "lodestar_core.h"

#include <string.h>

const char *lds_version(void)
{
    return LDS_VERSION_STRING;
}

const char *lds_strerror(lds_status status)
{
    switch (status) {
#define LDS__STATUS_TEXT(name, value, text)                                                        \
    case LDS_##name:                                                                               \
        return text;
        LDS_STATUS_LIST(LDS__STATUS_TEXT)
#undef LDS__STATUS_TEXT
    }
    return "unknown status";
}

const char *lds_status_name(lds_status status)
{
    switch (status) {
#define LDS__STATUS_NAME(name, value, text)                                                        \
    case LDS_##name:                                                                               \
        return #name;
        LDS_STATUS_LIST(LDS__STATUS_NAME)
#undef LDS__STATUS_NAME
    }
    return "UNKNOWN";
}

void lds_error_init(lds_error *err)
{
    if (!err)
        return;
    memset(err, 0, sizeof *err);
    err->size = sizeof *err;
}

size_t lds_dtype_size(lds_dtype dtype)
{
    switch (dtype) {
    case LDS_DTYPE_F32:
        return 4;
    case LDS_DTYPE_F16:
    case LDS_DTYPE_BF16:
        return 2;
    case LDS_DTYPE_I8:
        return 1;
    }
    return 0;
}

static const struct {
    lds_dtype dtype;
    const char *name;
} dtype_names[] = {
    {LDS_DTYPE_F32, "f32"}, {LDS_DTYPE_F16, "f16"}, {LDS_DTYPE_BF16, "bf16"}, {LDS_DTYPE_I8, "i8"}};

static const struct {
    lds_metric metric;
    const char *name;
} metric_names[] = {{LDS_METRIC_COSINE, "cosine"}, {LDS_METRIC_DOT, "dot"}, {LDS_METRIC_L2, "l2"}};

const char *lds_dtype_name(lds_dtype dtype)
{
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++)
        if (dtype_names[i].dtype == dtype)
            return dtype_names[i].name;
    return NULL;
}

lds_status lds_dtype_from_name(const char *name, lds_dtype *out)
{
    if (!name || !out)
        return LDS_E_INVALID_ARG;
    for (size_t i = 0; i < sizeof dtype_names / sizeof dtype_names[0]; i++) {
        if (strcmp(dtype_names[i].name, name) == 0) {
            *out = dtype_names[i].dtype;
            return LDS_OK;
        }
    }
    return LDS_E_BAD_VALUE;
}

const char *lds_metric_name(lds_metric metric)
{
    for (size_t i = 0; i < sizeof metric_names / sizeof metric_names[0]; i++)
        if (metric_names[i].metric == metric)
            return metric_names[i].name;
    return NULL;
}

lds_status lds_metric_from_name(const char *name, lds_metric *out)
{
    if (!name || !out)
        return LDS_E_INVALID_ARG;
    for (size_t i = 0; i < sizeof metric_names / sizeof metric_names[0]; i++) {
        if (strcmp(metric_names[i].name, name) == 0) {
            *out = metric_names[i].metric;
            return LDS_OK;
        }
    }
    return LDS_E_BAD_VALUE;
}

void lds_limits_default(lds_limits *limits)
{
    if (!limits)
        return;
    limits->size = sizeof *limits;
    limits->max_dim = LDS_DEFAULT_MAX_DIM;
    limits->max_rows = LDS_DEFAULT_MAX_ROWS;
    limits->max_key_bytes = LDS_DEFAULT_MAX_KEY_BYTES;
    limits->max_metadata_bytes = LDS_DEFAULT_MAX_METADATA_BYTES;
}
