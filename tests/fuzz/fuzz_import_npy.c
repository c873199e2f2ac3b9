/* Fuzz target: lds_import_file on NumPy .npy input (see fuzz_import.h). */
#define FZ_FORMATS LDS_IMPORT_NPY
#include "fuzz_import.h"
