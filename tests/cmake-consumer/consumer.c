/* Built by CMake against an installed lodestar (find_package(lodestar), lodestar::lodestar):
   loads INDEX, looks KEY up and prints what it found, one field per line, for
   tests/test_cmake_consumer.sh to compare with `lodestar get --json`. */
#include <lodestar.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: consumer INDEX KEY\n");
        return 2;
    }
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    lds_status st = lds_load_path(argv[1], NULL, &idx, NULL, &err);
    if (st != LDS_OK) {
        fprintf(stderr, "consumer: %s: %s\n", argv[1], err.message);
        return 1;
    }
    uint32_t dim = lds_index_dim(idx);
    uint64_t row = 0;
    float *vec = malloc(sizeof *vec * dim);
    if (!vec || lds_index_find_key(idx, argv[2], strlen(argv[2]), &row) != LDS_OK ||
        lds_index_row_f32(idx, row, vec, dim) != LDS_OK) {
        fprintf(stderr, "consumer: %s: no key '%s'\n", argv[1], argv[2]);
        free(vec);
        lds_index_free(idx);
        return 1;
    }
    printf("version %s\n", lds_version());
    printf("rows %llu\n", (unsigned long long)lds_index_rows(idx));
    printf("dim %u\n", (unsigned)dim);
    printf("row %llu\n", (unsigned long long)row);
    printf("vector");
    for (uint32_t i = 0; i < dim; i++)
        printf(" %.9g", (double)vec[i]);
    printf("\n");
    free(vec);
    lds_index_free(idx);
    return 0;
}
