/* Fuzz target: lds_import_file on .fvecs input (see fuzz_import.h). */
#define FZ_FORMATS LDS_IMPORT_FVECS
#include "fuzz_import.h"
