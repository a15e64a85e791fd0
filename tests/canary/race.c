/* A deliberate data race: the TSan build must report it (see tests/CMakeLists.txt). */
#include <pthread.h>
#include <stdio.h>

#if !defined(__SANITIZE_THREAD__)
#error "tsan canary built without -fsanitize=thread"
#endif

static int shared_counter;

static void *bump(void *arg)
{
    (void)arg;
    for (int i = 0; i < 100000; i++)
        shared_counter++;
    return NULL;
}

int main(void)
{
    pthread_t a, b;
    pthread_create(&a, NULL, bump, NULL);
    pthread_create(&b, NULL, bump, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("%d\n", shared_counter);
    return 0;
}
