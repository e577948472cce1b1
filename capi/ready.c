/* The ready queue: a ring of handles whose callbacks run in the next
 * batch, its length in zl_shared.ready_len (the engine reads it to choose a
 * zero timeout). Pushing and popping are inline in zl.h, since every
 * call_soon pushes; this file grows, clears, traverses and frees the ring.
 *
 * It knows nothing of why a handle is ready (a call_soon, a timer, a
 * descriptor) nor of the engine. */
#include "zl.h"

int zl_ready_init(zl_loop *L)
{
    L->ring_cap = 256;
    L->ring = PyMem_Malloc(L->ring_cap * sizeof(zl_handle *));
    return L->ring == NULL ? -1 : 0;
}

/* Doubles the ring, which is full. */
int zl_ready_grow(zl_loop *L)
{
    int64_t cap = L->ring_cap * 2;
    zl_handle **ring = PyMem_Malloc(cap * sizeof(zl_handle *));
    if (ring == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int64_t i = 0; i < L->sh.ready_len; i++)
        ring[i] = L->ring[(L->ring_head + i) & (L->ring_cap - 1)];
    PyMem_Free(L->ring);
    L->ring = ring;
    L->ring_cap = cap;
    L->ring_head = 0;
    return 0;
}

void zl_ready_clear(zl_loop *L)
{
    while (L->sh.ready_len > 0)
        zl_handle_release(zl_ready_pop(L));
}

int zl_ready_traverse(zl_loop *L, visitproc visit, void *arg)
{
    for (int64_t i = 0; i < L->sh.ready_len; i++) {
        int r = zl_visit_pending(L->ring[(L->ring_head + i) & (L->ring_cap - 1)], visit, arg);
        if (r != 0)
            return r;
    }
    return 0;
}

void zl_ready_free(zl_loop *L) { PyMem_Free(L->ring); }
