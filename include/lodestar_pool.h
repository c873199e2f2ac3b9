/* lodestar_pool.h: filled in by its module. */
#ifndef LODESTAR_POOL_H
#define LODESTAR_POOL_H
#endif
