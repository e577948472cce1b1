"""Objects a handle lends to CPython must outlive the call that borrows
them, whatever Python code runs meanwhile: two programs of issue 39 (#4,
#5) in which that code frees them, each in a fresh interpreter on both
loops, compared with asyncio's output.

These are the sanitizer stage's canaries (scripts/test runs this file
under AddressSanitizer, scripts/sanitize): in both programs CPython then
reads the freed memory through memcpy/memcmp, which ASan checks, so the
ASan build reports a heap-use-after-free naming the adapter's frames. A
normal build does not always show it: the freed memory still holds the
old bytes, and the reflected comparison below then gives asyncio's
answer. What they do not know: how the adapter should keep the objects
alive (capi/handle.c, capi/timer_handle.c)."""

from helpers import run_script


def observe(loop_name, program):
    """What the program prints on that loop, in a fresh interpreter; it
    must exit 0 (a crash, or ASan's report, is a non-zero exit)."""
    proc = run_script(loop_name, program)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_nested_run_then_cancel_keeps_the_arguments_alive(loop_name):
    """#4: h._run() inside h's own callback, then h.cancel(). The nested
    run fails (the context is already entered), and the cancel must not
    free the arguments the outer call is still using: str.replace reads
    `self` after __index__ ran. The nested run's RuntimeError reaches the
    handler up to 3.11; from 3.12 asyncio calls the handler in the
    handle's context, which is entered, so that call fails and is logged."""
    program = """
        loop = factory()
        reports = []
        loop.set_exception_handler(
            lambda lp, ctx: reports.append(type(ctx.get("exception")).__name__)
        )

        class Count:
            def __index__(self):
                h._run()
                h.cancel()
                return -1

        # made at run time, so that the handle holds their only references
        text, old, new = "xy" * 5000, "".join(["x", "y"]), "".join(["z", "w"])
        h = loop.call_soon(str.replace, text, old, new, Count())
        del text, old, new
        loop.call_soon(loop.stop)
        loop.run_forever()
        loop.close()
        print("reports", reports)
        print("survived")
        """
    assert observe(loop_name, program) == observe("asyncio", program)


def test_reflected_eq_after_a_callback_cancelled_the_other_timer(loop_name):
    """#5: comparing two timers compares their callbacks; the first
    callback's __eq__ cancels the other timer, whose callback was then
    freed while the comparison still held it borrowed, and Python's
    reflected comparison (str's, a memcmp) read it. Reached through
    list.remove, as the issue's program did."""
    program = """
        loop = factory()
        handles = {}

        class Canceller(str):
            def __call__(self):
                pass

            def __eq__(self, other):
                handles["b"].cancel()  # drops b's callback: `other`
                return NotImplemented  # Python then tries other == self

        class Plain(str):
            def __call__(self):
                pass

        when = loop.time() + 3600
        handles["a"] = loop.call_at(when, Canceller("x" * 1000))
        handles["b"] = loop.call_at(when, Plain("".join(["x"] * 1000)))
        timers = [handles["a"]]
        try:
            timers.remove(handles["b"])
            print("removed")
        except ValueError:
            print("not found")
        loop.close()
        print("survived")
        """
    assert observe(loop_name, program) == observe("asyncio", program)
