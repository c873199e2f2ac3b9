/* lodestar_load.h: filled in by its module. */
#ifndef LODESTAR_LOAD_H
#define LODESTAR_LOAD_H
#endif
