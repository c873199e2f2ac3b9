/*
 * lodestar: load embedding indexes from files and streams, fast and safely.
 *
 * This is the public header: include it and nothing else. It includes every
 * header of the library, each under its own banners:
 *
 *   lodestar_core.h    version, status codes, error detail, element types,
 *                      metrics and parser limits, shared by every part
 *   lodestar_index.h   the index, the payload parser and the writer (format/)
 *   lodestar_import.h  importers from formats users already hold (import/)
 *   lodestar_pool.h    the buffer pool (pool/)
 *   lodestar_load.h    the stream loader (loader/)
 *   lodestar_live.h    the live index: pinned readers, reloads, retirement (live/)
 *   lodestar_manifest.h the shard manifest of `lodestar split`: read, check (loader/)
 *
 * Each sibling also compiles on its own (C and C++) and includes the headers
 * it depends on: core for all; index for import and load; pool for load. The
 * conventions and the struct-size rule are stated in lodestar_core.h.
 */
#ifndef LODESTAR_H
#define LODESTAR_H

#include "lodestar_core.h"
#include "lodestar_index.h"
#include "lodestar_import.h"
#include "lodestar_pool.h"
#include "lodestar_load.h"
#include "lodestar_live.h"
#include "lodestar_manifest.h"

#endif /* LODESTAR_H */
