/* Fuzz target: lds_import_file on GloVe text and word2vec text input (see fuzz_import.h). */
#define FZ_FORMATS LDS_IMPORT_GLOVE, LDS_IMPORT_W2V_TEXT
#include "fuzz_import.h"
