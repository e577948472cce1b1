"""Put into the site-packages of each Windows CPython that scripts/windows
runs under Wine. Wine 8's WMI does not answer platform's query the way
Windows does: the process aborts inside it (propsys.VariantToString).
Failing the query as a machine without WMI would makes platform take its
other sources (the registry, `ver`). It knows nothing of zloopgo."""

import platform


def _no_wmi(*args, **kwargs):
    raise OSError("WMI is not queried under Wine")


platform._wmi_query = _no_wmi
