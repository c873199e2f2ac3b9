/* JSON helpers shared by the commands (json-c): the key of a row. */
#include "cli.h"

#include <json-c/json.h>

json_object *cli_json_key(const lds_index *idx, uint64_t row)
{
    const char *key = NULL;
    size_t len = 0;
    if (lds_index_key(idx, row, &key, &len) != LDS_OK)
        return NULL;
    return json_object_new_string_len(key, (int)len);
}
