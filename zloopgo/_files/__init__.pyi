"""Type stub for the zloopgo._files package: zloopgo.open() and the file it
gives."""

from collections.abc import Callable, Generator, Iterable
from os import PathLike
from types import TracebackType
from typing import Any, Generic, Literal, TypeAlias, TypeVar, overload

_T = TypeVar("_T", str, bytes)
_F = TypeVar("_F", bound=AsyncFile[Any])
_Path: TypeAlias = str | bytes | PathLike[str] | PathLike[bytes]
_Opener: TypeAlias = Callable[[str, int], int]

class AsyncFile(Generic[_T]):
    """What zloopgo.open() gives: open()'s file with awaitable I/O (in text
    mode, what open()'s TextIOWrapper has)."""

    @property
    def name(self) -> Any: ...
    @property
    def mode(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def fileno(self) -> int: ...
    def readable(self) -> bool: ...
    def writable(self) -> bool: ...
    def seekable(self) -> bool: ...
    def isatty(self) -> bool: ...
    async def read(self, size: int | None = -1) -> _T: ...
    async def readline(self, size: int | None = -1) -> _T: ...
    async def readlines(self, hint: int | None = -1) -> list[_T]: ...
    async def write(self, data: Any) -> int: ...
    async def writelines(self, lines: Iterable[Any]) -> None: ...
    async def seek(self, offset: int, whence: int = 0) -> int: ...
    async def tell(self) -> int: ...
    async def truncate(self, size: int | None = None) -> int: ...
    async def flush(self) -> None: ...
    async def close(self) -> None: ...
    async def pread(self, size: int, offset: int) -> bytes: ...
    async def pwrite(self, data: Any, offset: int) -> int: ...
    def __aiter__(self) -> AsyncFile[_T]: ...
    async def __anext__(self) -> _T: ...
    async def __aenter__(self) -> AsyncFile[_T]: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

class AsyncBinaryFile(AsyncFile[bytes]):
    """A file opened in binary mode: also what open()'s buffered binary
    files have beyond the text ones."""

    async def read1(self, size: int = -1) -> bytes: ...
    async def readinto(self, b: Any) -> int: ...
    async def readinto1(self, b: Any) -> int: ...
    async def peek(self, size: int = 0) -> bytes: ...
    def __aiter__(self) -> AsyncBinaryFile: ...
    async def __aenter__(self) -> AsyncBinaryFile: ...

class Opening(Generic[_F]):
    """zloopgo.open()'s result: awaitable, and an async context manager."""

    def __await__(self) -> Generator[Any, None, _F]: ...
    async def __aenter__(self) -> _F: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

_BinaryMode: TypeAlias = Literal[
    "rb",
    "wb",
    "ab",
    "xb",
    "r+b",
    "w+b",
    "a+b",
    "x+b",
    "rb+",
    "wb+",
    "ab+",
    "xb+",
    "br",
    "bw",
    "ba",
    "bx",
]

_TextMode: TypeAlias = Literal[
    "r",
    "w",
    "a",
    "x",
    "r+",
    "w+",
    "a+",
    "x+",
    "rt",
    "wt",
    "at",
    "xt",
    "r+t",
    "w+t",
    "a+t",
    "x+t",
    "rt+",
    "wt+",
    "at+",
    "xt+",
]

@overload
def open(
    file: _Path | int,
    mode: _BinaryMode,
    buffering: int = -1,
    encoding: None = None,
    errors: None = None,
    newline: None = None,
    closefd: bool = True,
    opener: _Opener | None = None,
) -> Opening[AsyncBinaryFile]: ...
@overload
def open(
    file: _Path | int,
    mode: _TextMode = "r",
    buffering: int = -1,
    encoding: str | None = None,
    errors: str | None = None,
    newline: str | None = None,
    closefd: bool = True,
    opener: _Opener | None = None,
) -> Opening[AsyncFile[str]]: ...
@overload
def open(
    file: _Path | int,
    mode: str,
    buffering: int = -1,
    encoding: str | None = None,
    errors: str | None = None,
    newline: str | None = None,
    closefd: bool = True,
    opener: _Opener | None = None,
) -> Opening[Any]: ...
