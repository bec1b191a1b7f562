"""Pickle support for read-only mappings (records' resource)."""
import copyreg
from types import MappingProxyType


def proxy(items):
    return MappingProxyType(items)


copyreg.pickle(MappingProxyType, lambda m: (proxy, (dict(m),)))
