"""probes/timesplit.py: which column a perf sample lands in and how
`perf report` rows are read (the workloads' side of perf's control is
tested in benchmark/tests/test_workloads.py). perf itself is not needed
here."""

import pytest

from .. import timesplit

ENGINE = "_engine.cpython-314-x86_64-linux-gnu.so"


@pytest.mark.parametrize(
    "dso, symbol, expected",
    [
        ("[kernel.kallsyms]", "fdget", "kernel"),
        ("python3.14", "0x000000000045260a", "interpreter"),
        ("libpython3.13.so.1.0", "_PyEval_EvalFrameDefault", "interpreter"),
        ("_asyncio.cpython-314-x86_64-linux-gnu.so", "task_step", "_asyncio"),
        (ENGINE, "zl_dispatch", "adapter (C)"),
        (ENGINE, "remove_watch.part.0", "adapter (C)"),
        (ENGINE, "read_step.isra.0", "adapter (C)"),
        (ENGINE, "0x0000000000012570", "adapter (C)"),
        (ENGINE, "runtime.mallocgc", "Go"),
        (ENGINE, "main.(*host).Dispatch", "Go"),
        (ENGINE, "github.com/zloopgo/zloopgo/core.(*Engine).RunOnce", "Go"),
        (ENGINE, "golang.org/x/sys/unix.EpollWait", "Go"),
        (ENGINE, "internal/runtime/atomic.(*Uint32).Load", "Go"),
        (ENGINE, "crosscall2", "Go"),
        (ENGINE, "x_cgo_thread_start", "Go"),
        ("_zuvloop.cpython-314-x86_64-linux-gnu.so", "handle_run", "loop's own"),
        ("loop.cpython-314-x86_64-linux-gnu.so", "__pyx_f_6uvloop", "loop's own"),
        ("_loop.cpython-314-x86_64-linux-gnu.so", "rsloop::run", "loop's own"),
        ("libc.so.6", "__memcpy_avx_unaligned_erms", "libc"),
        ("ld-linux-x86-64.so.2", "_dl_lookup_symbol_x", "libc"),
        ("[vdso]", "__vdso_clock_gettime", "libc"),
        ("libcrypto.so.3", "aesni_gcm_encrypt", "other"),
    ],
)
def test_each_sample_lands_in_the_column_of_what_ran(dso, symbol, expected):
    assert timesplit.column(dso, symbol) == expected


def test_report_rows_give_samples_object_and_symbol():
    report = "\n".join(
        [
            "# Samples: 5K of event 'cpu-clock'",
            "#",
            "      1160  [kernel.kallsyms]  [k] _copy_to_iter",
            "        29  python3.14         [.] 0x00000000001952c6",
            f"        12  {ENGINE}  [.] main.(*host).Dispatch",
            "",
            "not a row",
        ]
    )
    assert list(timesplit._samples(report)) == [
        (1160, "[kernel.kallsyms]", "_copy_to_iter"),
        (29, "python3.14", "0x00000000001952c6"),
        (12, ENGINE, "main.(*host).Dispatch"),
    ]
