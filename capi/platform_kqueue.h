/* The part of the platform layer (capi/platform.h) for macOS and the
 * BSDs, where the engine's reactor is core/kqueue. That backend hands out
 * no poller to look at (core/poll.PeekNone): capi/engine.go then gives C
 * no descriptor (zl_shared.poller_fd is -1), so the engine makes every
 * wait and every change of interest itself, and C never calls the poller
 * functions (platform_nopoller.h's, which answer as a poller that cannot
 * be used would).
 * Making C look at a kqueue means a Peek kind in core/kqueue first.
 *
 * It knows which clock time.monotonic() reads on these systems; nothing
 * of loops or Python. */
#ifndef ZL_PLATFORM_KQUEUE_H
#define ZL_PLATFORM_KQUEUE_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

/* time.monotonic()'s clock, which the Go runtime's nanotime reads too:
 * on macOS mach_absolute_time(), which is CLOCK_UPTIME_RAW (CLOCK_MONOTONIC
 * there also counts time asleep, and would disagree with both). */
#if defined(__APPLE__)
#define ZL_SYS_MONOTONIC_CLOCK CLOCK_UPTIME_RAW
#else
#define ZL_SYS_MONOTONIC_CLOCK CLOCK_MONOTONIC
#endif

#include "platform_nopoller.h"

#endif
