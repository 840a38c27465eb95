/*
 * fuzz_list.c - the list-file parser. Input: the whole list file (no
 * parameter bytes). It is written to list.txt in the fixture folder
 * (fuzz_common.h: files with spaces and tabs in their names, a FIFO, a
 * link loop, a link to /dev/null, a folder) and indexed as coordl_open
 * would (cdl__io_slurp through the POSIX reader, then
 * cdl__index_list_text).
 * Oracles: on success every item names a regular file whose size is its
 * byte count, every label is in 0..2147483646 and below num_classes, and
 * num_classes is the largest label + 1; on failure the message names the
 * list file.
 */
#include "../../coordl.c"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char list[1024];
    snprintf(list, sizeof list, "%s/list.txt", fz_fixture());
    fz_write("list.txt", data, size);
    coordl_config cfg = fz_config();
    cfg.source = list;
    coordl *L = fz_loader(&cfg);
    cdl__open_errmsg[0] = '\0';
    char *text = NULL;
    size_t len = 0;
    coordl_status rc = cdl__io_slurp(L, list, "list file", &text, &len);
    if (rc == COORDL_OK)
        rc = cdl__index_list_text(L, list, text, len);
    cdl__free(L, text);
    if (rc != COORDL_OK) {
        FZ_CHECK(rc == COORDL_ERR_INVALID || rc == COORDL_ERR_NOMEM, "status %d", (int)rc);
        FZ_CHECK(strstr(cdl__open_errmsg, "list.txt") != NULL || rc == COORDL_ERR_NOMEM,
                 "message \"%s\" does not name the list", cdl__open_errmsg);
    } else {
        int64_t max_label = -1;
        uint64_t bytes = 0;
        for (uint64_t i = 0; i < L->index.num_items; i++) {
            const cdl__item *it = &L->index.items[i];
            FZ_CHECK(it->path_off < L->index.strings_len, "path offset %llu", (unsigned long long)it->path_off);
            const char *p = L->index.strings + it->path_off;
            FZ_CHECK(memchr(p, 0, L->index.strings_len - it->path_off) != NULL, "unterminated path");
            struct stat sb;
            FZ_CHECK(stat(p, &sb) == 0 && S_ISREG(sb.st_mode), "item %llu (%s) is not a regular file",
                     (unsigned long long)i, p);
            FZ_CHECK(it->label >= 0 && it->label <= CDL_MAX_LABEL, "label %d", it->label);
            if (it->label > max_label)
                max_label = it->label;
            bytes += it->bytes;
        }
        FZ_CHECK(L->index.num_classes == (uint32_t)(max_label + 1), "num_classes %u, largest label %lld", L->index.num_classes,
                 (long long)max_label);
        FZ_CHECK(bytes == L->index.dataset_bytes, "dataset_bytes");
    }
    fz_loader_free(L);
    return 0;
}
