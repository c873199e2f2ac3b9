/*
 * Recovery from SIGBUS and SIGSEGV inside a window (lds_common.h): a file
 * mapped by the loader may be truncated (SIGBUS on the pages past its new end)
 * or rewritten by another process while it is validated. Faults of threads
 * outside a window, or outside this library's windows, go to the handler that
 * was installed before ours, or take the default action.
 */
#include "lds_common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <string.h>

/* initial-exec: the handler reads these without a call that could allocate. */
static _Thread_local lds__fault_window *current __attribute__((tls_model("initial-exec")));

static struct sigaction prev_bus, prev_segv;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static bool installed;

static void on_fault(int sig, siginfo_t *si, void *uctx)
{
    lds__fault_window *w = current;
    if (w != NULL) {
        current = w->prev;
        w->sig = sig;
        w->addr = si != NULL ? si->si_addr : NULL;
        siglongjmp(w->jb, 1);
    }
    const struct sigaction *p = sig == SIGBUS ? &prev_bus : &prev_segv;
    if (p->sa_flags & SA_SIGINFO) {
        p->sa_sigaction(sig, si, uctx);
    } else if (p->sa_handler != SIG_DFL && p->sa_handler != SIG_IGN) {
        p->sa_handler(sig);
    } else {
        /* Default action: restore it; the faulting access runs again and faults again. */
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
    }
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    installed = sigaction(SIGBUS, &sa, &prev_bus) == 0 && sigaction(SIGSEGV, &sa, &prev_segv) == 0;
}

bool lds__fault_install(void)
{
    pthread_once(&install_once, install);
    return installed;
}

void lds__fault_enter(lds__fault_window *w)
{
    w->prev = current;
    w->cleanup = NULL;
    w->cleanup_arg = NULL;
    w->sig = 0;
    w->addr = NULL;
    atomic_signal_fence(memory_order_seq_cst);
    current = w;
}

void lds__fault_leave(lds__fault_window *w)
{
    atomic_signal_fence(memory_order_seq_cst);
    if (current == w)
        current = w->prev;
}

void lds__fault_set_cleanup(void (*fn)(void *), void *arg)
{
    lds__fault_window *w = current;
    if (w == NULL)
        return;
    w->cleanup_arg = arg;
    w->cleanup = fn;
    atomic_signal_fence(memory_order_seq_cst);
}
