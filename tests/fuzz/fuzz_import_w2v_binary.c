/* Fuzz target: lds_import_file on word2vec binary input (see fuzz_import.h). */
#define FZ_FORMATS LDS_IMPORT_W2V_BINARY
#include "fuzz_import.h"
