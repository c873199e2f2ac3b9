/* README.md's service loop: requests pin the current generation, a reload swaps in the next. */
#include <lodestar.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    lds_live *live = NULL;
    lds_error err;
    lds_error_init(&err);
    if (argc != 3 || lds_live_create(NULL, &live, &err) != LDS_OK ||
        lds_live_reload_path(live, argv[1], NULL, NULL, NULL, &err) != LDS_OK)
        return fprintf(stderr, "usage: example_live INDEX KEY; %s\n", err.message), 1;
    for (int request = 0; request < 3; request++) {
        lds_pin pin; /* the pinned generation is never freed until its unpin */
        uint64_t row = 0;
        if (lds_live_pin(live, &pin) != LDS_OK)
            return 1;
        lds_status st = lds_index_find_key(pin.index, argv[2], strlen(argv[2]), &row);
        printf("generation %llu: %s %s at row %llu\n", (unsigned long long)pin.generation,
               argv[2], lds_status_name(st), (unsigned long long)row);
        lds_live_unpin(live, &pin); /* a retired generation is freed at its last unpin */
        /* a new build landed (a timer, SIGHUP, inotify...): on failure the old one serves on */
        if (lds_live_reload_path(live, argv[1], NULL, NULL, NULL, &err) != LDS_OK)
            fprintf(stderr, "reload failed, still serving: %s\n", err.message);
    }
    lds_live_free(live);
    return 0;
}
