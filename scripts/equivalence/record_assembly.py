"""pytest plugin: record every TraceAssembly input and output (the equivalence corpus, see README.md).

ASSEMBLY_CORPUS=DIR PYTHONPATH=scripts/equivalence python -m pytest -p record_assembly ...  -> DIR/<pid>.pkl
"""

import atexit
import dataclasses
import hashlib
import os
import pickle

import proxy_pickle  # noqa: F401  (records hold read-only mappings)

from otel_agent_eval.assembly import core

OUT = os.environ.get("ASSEMBLY_CORPUS", "/tmp/assembly-corpus")
os.makedirs(OUT, exist_ok=True)
_seen: dict[str, tuple[bytes, list[str]]] = {}
_original = core.TraceAssembly.run


def _plain(record):
    """A record whose mappings pickle (SDK BoundedAttributes hold a lock): the same keys and values."""
    events = tuple(dataclasses.replace(e, attributes=dict(e.attributes)) for e in record.events)
    return dataclasses.replace(record, attributes=dict(record.attributes), events=events)


def run(self):
    records = dict(self.records)
    try:
        blob = pickle.dumps(records)
    except Exception:  # noqa: BLE001
        blob = pickle.dumps({k: _plain(r) for k, r in records.items()})
    result = _original(self)
    key = hashlib.sha1(blob).hexdigest()
    if key not in _seen:
        _seen[key] = (blob, [t.model_dump_json() for t in result])
    return result


core.TraceAssembly.run = run


@atexit.register
def _dump() -> None:
    if _seen:
        with open(os.path.join(OUT, f"{os.getpid()}.pkl"), "wb") as f:
            pickle.dump(_seen, f)
