/* Fuzz target: lds_import_file on NumPy .npz (zip) input (see fuzz_import.h). */
#define FZ_FORMATS LDS_IMPORT_NPZ
#include "fuzz_import.h"
