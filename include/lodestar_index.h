/* lodestar_index.h: filled in by its module. */
#ifndef LODESTAR_INDEX_H
#define LODESTAR_INDEX_H
#endif
