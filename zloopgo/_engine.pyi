"""Type stub for zloopgo._engine, the Go c-shared extension: the part the
package's typed surface uses."""

def build_info_json() -> str: ...
