/* SPDX-License-Identifier: MIT */
/*
 * coordl-index - writes the saved index of a tar-shard source ahead of
 * time (docs/index.md) and prints what it found:
 *
 *   coordl-index [--audio] [--force] SOURCE INDEX_FILE
 *
 * SOURCE is what cfg.source takes (a .tar, a folder or glob of them, a
 * list of them, a brace pattern, http(s):// URLs); INDEX_FILE is what
 * cfg.index_path then names. A sound, fresh INDEX_FILE is loaded, not
 * rewritten, unless --force. --audio indexes .wav members (the audio
 * pipeline) instead of images. Exit status: 0 written or up to date, 1
 * the source could not be indexed, 2 usage, or a source that is not tar
 * shards (no index is saved for it).
 */
#include "coordl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int g_saved;

/* coordl's log: warnings and errors to stderr; notes whether it saved. */
static void on_log(void *user, coordl_log_level level, const char *msg)
{
    (void)user;
    if (strstr(msg, "index_path: saved")) g_saved = 1;
    if (level <= COORDL_LOG_WARN) fprintf(stderr, "coordl-index: %s\n", msg);
}

static int usage(FILE *f, int status)
{
    fprintf(f, "usage: coordl-index [--audio] [--force] SOURCE INDEX_FILE\n"
               "  writes the index coordl_open loads with cfg.index_path = INDEX_FILE\n"
               "  (tar-shard sources), and prints items, shards, bytes and classes\n");
    return status;
}

/* The shard count, from the index file's header (docs/index.md: the u64
 * at byte 40 after the "coordlIX" magic). */
static long long shards_of(const char *path)
{
    unsigned char h[48];
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    const size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    if (got != sizeof h || memcmp(h, "coordlIX", 8) != 0) return -1;
    uint64_t v;
    memcpy(&v, h + 40, 8);
    return (long long)v;
}

int main(int argc, char **argv)
{
    int audio = 0, force = 0, i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--audio") == 0) audio = 1;
        else if (strcmp(argv[i], "--force") == 0) force = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return usage(stdout, 0);
        else return usage(stderr, 2);
    }
    if (argc - i != 2) return usage(stderr, 2);
    const char *source = argv[i], *index = argv[i + 1];
    if (force && unlink(index) != 0 && access(index, F_OK) == 0) {
        perror(index);
        return 1;
    }
    coordl_config cfg = coordl_config_default();
    cfg.source = source;
    cfg.index_path = index;
    cfg.pipeline = audio ? COORDL_PIPE_AUDIO : COORDL_PIPE_EVAL;
    cfg.threads = 1;
    cfg.readahead_items = 0;
    cfg.batch_size = 1;
    cfg.log = on_log;
    cfg.log_level = COORDL_LOG_INFO;
    if (audio) cfg.out_w = 16000;
    coordl *L;
    if (coordl_open(&cfg, &L) != COORDL_OK) {
        fprintf(stderr, "coordl-index: %s\n", coordl_errmsg(NULL));
        return 1;
    }
    coordl_stats st;
    coordl_get_stats(L, &st);
    const unsigned long long items = (unsigned long long)coordl_num_items(L);
    const unsigned classes = coordl_num_classes(L);
    coordl_close(L);
    struct stat sb;
    const long long shards = shards_of(index);
    if (shards < 0 || stat(index, &sb) != 0) {
        fprintf(stderr, "coordl-index: %s is not tar shards: no index is saved for it (docs/index.md)\n", source);
        return 2;
    }
    printf("source: %s\n", source);
    printf("index: %s (%s)\n", index, g_saved ? "written" : "up to date");
    printf("items: %llu\n", items);
    printf("shards: %lld\n", shards);
    printf("bytes: %llu\n", (unsigned long long)st.dataset_bytes);
    printf("classes: %u\n", classes);
    printf("index bytes: %lld (%.1f per item on disk, 24 resident when loaded)\n", (long long)sb.st_size,
           items ? (double)sb.st_size / (double)items : 0.0);
    return 0;
}
