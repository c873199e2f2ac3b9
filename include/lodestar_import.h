/* lodestar_import.h: filled in by its module. */
#ifndef LODESTAR_IMPORT_H
#define LODESTAR_IMPORT_H
#endif
