/*
 * replay.c - runs a libFuzzer target over every file of the directories (or
 * files) named on the command line, without libFuzzer.  Exits non-zero if a
 * path cannot be read or the corpus is empty; a crash is a crash.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf)
        return -1;
    /* Hand libFuzzer-style an exactly sized copy so overreads are caught. */
    unsigned char *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

int main(int argc, char **argv)
{
    long count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            if (run_file(argv[i]) != 0)
                return 1;
            count++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            perror(argv[i]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.')
                continue;
            size_t l = strlen(argv[i]) + strlen(e->d_name) + 2;
            char *p = malloc(l);
            if (!p)
                return 1;
            snprintf(p, l, "%s/%s", argv[i], e->d_name);
            int r = run_file(p);
            free(p);
            if (r != 0) {
                closedir(d);
                return 1;
            }
            count++;
        }
        closedir(d);
    }
    printf("replayed %ld inputs\n", count);
    return count > 0 ? 0 : 1;
}
