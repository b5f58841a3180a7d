/* tests/test_mutants.c — tests/mutants/suites.map covers the tree.
 *
 * The mutation check (scripts/mutate.sh, docs/testing.md § 4) runs, as its
 * first layer, the suites the map gives a mutated file; a file without a
 * line is refused, and a suite the map names that does not exist would
 * make the layer fail for the wrong reason. Every source file of the
 * library and the command has a line (its own or a folder's), and every
 * suite named is one of this program's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#define MAP "tests/mutants/suites.map"

/* 1 when a line of the map (PATH SUITE...) is for file: PATH is the file,
 * or a folder ending in '/' above it. */
static int mapped(const char *map, const char *file)
{
    char path[256];
    for (const char *l = map; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        if (*l == '#' || sscanf(l, "%255s", path) != 1)
            continue;
        size_t pl = strlen(path);
        if (!strcmp(path, file) || (path[pl - 1] == '/' && !strncmp(path, file, pl)))
            return 1;
    }
    return 0;
}

static void test_map_covers_sources(void)
{
    static char map[1 << 14], files[1 << 14];
    CU_ASSERT_PTR_NOT_NULL_FATAL(strchr(ddp_test_read_file(MAP, map, sizeof map), '\n'));
    CU_ASSERT_EQUAL(ddp_test_shell_read("ls core/*.c backends/*.c plugins/*.c accelerators/*.c "
                                        "sim/*.c harness/*.c tools/*.c", files, sizeof files),
                    0);
    int n = 0;
    for (char *f = strtok(files, "\n"); f; f = strtok(NULL, "\n"), n++)
        if (!mapped(map, f)) {
            printf("\n  %s has no line in " MAP ": add one with the suites that test it\n", f);
            CU_FAIL("a source file without a line in suites.map");
        }
    CU_ASSERT(n > 50);
}

static void test_map_suites_exist(void)
{
    static char map[1 << 14], suites[1 << 12];
    ddp_test_read_file(MAP, map, sizeof map);
    ddp_test_shell_read("sed -n 's/^DDP_SUITE(\"\\([a-z_]*\\)\".*/ \\1 /p' tests/*.c | tr -d '\\n'",
                        suites, sizeof suites);
    CU_ASSERT_PTR_NOT_NULL_FATAL(strstr(suites, " mutants "));
    for (char *l = strtok(map, "\n"); l; l = strtok(NULL, "\n")) {
        char word[64], pad[68];
        int off = 0, at = 0;
        if (*l == '#' || sscanf(l, "%*s%n", &off) != 0 || !off)
            continue;
        for (l += off; sscanf(l, "%63s%n", word, &at) == 1; l += at) {
            snprintf(pad, sizeof pad, " %s ", word);
            if (!strstr(suites, pad)) {
                printf("\n  " MAP " names suite \"%s\", which no DDP_SUITE defines\n", word);
                CU_FAIL("suites.map names a suite that does not exist");
            }
        }
    }
}

DDP_SUITE("mutants", NULL, NULL,
          {"suites.map: every source file has a line", test_map_covers_sources},
          {"suites.map: every suite named exists", test_map_suites_exist})
