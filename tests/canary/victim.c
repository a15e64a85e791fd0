/* A deliberate heap overflow.  In the sanitized build CTest requires the
 * AddressSanitizer report; if the build were silently unsanitized this
 * program would exit 0 without it and the canary test would fail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__SANITIZE_ADDRESS__)
#error "sanitizer canary built without -fsanitize=address"
#endif

int main(int argc, char **argv)
{
    (void)argv;
    volatile size_t n = 16;
    char *p = malloc(n);
    memset(p, 0, n);
    volatile char c = p[n + (size_t)argc - 1]; /* one past the end */
    printf("read %d without a report\n", c);
    free(p);
    return 0;
}
