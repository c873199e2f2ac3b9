/* The README's example: load an index, look a key up, print its 5 nearest neighbours. */
#include <lodestar.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    lds_index *idx = NULL;
    lds_error err;
    lds_error_init(&err);
    if (argc != 3 || lds_load_path(argv[1], NULL, &idx, NULL, &err) != LDS_OK)
        return fprintf(stderr, "usage: example INDEX KEY; %s\n", err.message), 1;
    uint32_t dim = lds_index_dim(idx);
    float *query = malloc(dim * sizeof *query);
    uint64_t row;
    lds_hit hits[5];
    size_t n = 0;
    if (!query || lds_index_find_key(idx, argv[2], strlen(argv[2]), &row) != LDS_OK ||
        lds_index_row_f32(idx, row, query, dim) != LDS_OK ||
        lds_index_search(idx, query, dim, 5, hits, &n, &err) != LDS_OK)
        return fprintf(stderr, "%s: no such key, or the search failed\n", argv[2]), 1;
    for (size_t i = 0; i < n; i++) {
        const char *key;
        size_t len;
        lds_index_key(idx, hits[i].row, &key, &len);
        printf("%.*s %.4f\n", (int)len, key, (double)hits[i].score);
    }
    free(query);
    lds_index_free(idx);
    return 0;
}
