/* The corked list: the transports of one loop whose last send in the
 * running callback carried MSG_MORE (transport.c decides when a send
 * does). The kernel holds such a send's segment back for the write that
 * follows; when the callback returns without one, this file pushes it out
 * (TCP_CORK off, which sends what is queued and changes no setting of a
 * socket nobody corked). This file alone grows the list, pushes and
 * empties it, shows it to the collector and frees it; it counts the
 * pushes (zl_counters.corked_pushes).
 *
 * It holds transport states (zl_transport), which reference nothing and
 * whose dealloc runs no Python code: pushing runs none, so nothing can
 * write or re-enter the list meanwhile. It knows nothing of asyncio, the
 * engine or the ready queue. */
#include "zl.h"
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

int zl_corked_reserve(zl_loop *L)
{
    if (L->corked.len == L->corked.cap) {
        int64_t cap = L->corked.cap ? L->corked.cap * 2 : 8;
        PyObject **c = PyMem_Realloc(L->corked.items, cap * sizeof(PyObject *));
        if (c == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        L->corked.items = c;
        L->corked.cap = cap;
    }
    return 0;
}

void zl_corked_add(zl_loop *L, zl_transport *state, int fd)
{
    state->corked_fd = fd;
    L->corked.items[L->corked.len++] = Py_NewRef((PyObject *)state);
}

void zl_corked_push(zl_loop *L)
{
    for (int64_t i = 0; i < L->corked.len; i++) {
        zl_transport *t = (zl_transport *)L->corked.items[i];
#ifdef TCP_CORK /* Linux's; elsewhere transport.c never corks */
        if (t->corked) {
            int off = 0;
            /* the socket is the transport's until a later callback closes
             * it (asyncio's _call_connection_lost); errors change nothing */
            (void)setsockopt(t->corked_fd, IPPROTO_TCP, TCP_CORK, &off, sizeof off);
            L->counters.corked_pushes++;
        }
#endif
        t->corked = 0;
        t->listed = 0;
        Py_DECREF(t); /* a transport state's dealloc runs no Python code */
    }
    L->corked.len = 0;
}

void zl_corked_clear(zl_loop *L) { zl_corked_push(L); }

void zl_corked_free(zl_loop *L)
{
    PyMem_Free(L->corked.items);
    L->corked.items = NULL;
}
