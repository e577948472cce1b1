/* Test scaffolding for running Go's Windows test binaries under Wine 8
 * (scripts/cross): Go 1.22 and newer load ProcessPrng from
 * bcryptprimitives.dll, which Wine 8 lacks. This DLL provides it on top of
 * RtlGenRandom (advapi32's SystemFunction036). Never shipped. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buf, ULONG len);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG n = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
        if (!SystemFunction036(data, n))
            return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
