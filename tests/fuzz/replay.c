/*
 * replay.c - runs a fuzz harness without libFuzzer: every file named on
 * the command line, and every regular file in every folder named, is fed
 * to LLVMFuzzerTestOneInput once, in name order. A crash or an oracle's
 * abort() stops it (the file being replayed is printed first). Exit 0
 * when every input ran. `make test` builds it with each harness and
 * replays the seed corpus and tests/fuzz/regress/<target>/.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path, size_t *count)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            fprintf(stderr, "replay: out of memory reading %s\n", path);
            return 1;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        uint8_t *p = realloc(buf, cap * 2);
        if (!p)
            free(buf);
        buf = p;
        cap *= 2;
    }
    fclose(f);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    /* an exact-size copy, so a read past the input is caught by ASan */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return 1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    (*count)++;
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_dir(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open folder %s\n", dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **p = realloc(names, cap * sizeof *p);
            if (!p)
                break;
            names = p;
        }
        names[n] = strdup(e->d_name);
        if (names[n])
            n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    int fail = 0;
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
            fail |= replay_file(path, count);
        free(names[i]);
    }
    free(names);
    return fail;
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int fail = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "replay: no %s\n", argv[i]);
            fail = 1;
        } else if (S_ISDIR(sb.st_mode)) {
            fail |= replay_dir(argv[i], &count);
        } else {
            fail |= replay_file(argv[i], &count);
        }
    }
    printf("replay: %zu inputs ran%s\n", count, fail ? " (some could not be read)" : "");
    return fail;
}
