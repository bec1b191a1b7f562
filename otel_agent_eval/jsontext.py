"""JSON text through the standard library's C encoder, without ``JSONEncoder.encode``'s Python layers.

``JSONEncoder.encode`` is two Python calls that rebuild the C encoder's arguments on every call: on
the small values encoded per tool call or per result (arguments, details) that costs as much as the
encoding itself. ``fast_encode(encoder)`` goes straight to ``json.encoder.c_make_encoder`` with the
arguments ``encoder`` would hand it, checked once against ``encoder.encode``; where the C encoder is
missing or takes other arguments (another interpreter), it is ``encoder.encode`` itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_SAMPLES: tuple[Any, ...] = ({"b": [1, 2.5, None], "a": "\u00e9\n"}, "\u00e9\"x", [True, {"k": 1e300}])


def fast_encode(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode``, the same text, called straight on the C encoder (``indent`` unsupported).

    With ``check_circular`` each call gets a fresh dict of markers (a circular value raises ValueError, as
    ``encode`` does); without it one C encoder serves every call: it keeps no state between calls, so
    threads may share it (a circular value then ends in RecursionError, as ``encode`` does).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None or encoder.indent is not None:
        return encoder.encode
    strings = json.encoder.encode_basestring_ascii if encoder.ensure_ascii else json.encoder.encode_basestring
    arguments = (encoder.default, strings, None, encoder.key_separator, encoder.item_separator,
                 encoder.sort_keys, encoder.skipkeys, encoder.allow_nan)
    if encoder.check_circular:
        def encode(value: Any) -> str:
            return "".join(make({}, *arguments)(value, 0))
    else:
        shared = make(None, *arguments)

        def encode(value: Any) -> str:
            return "".join(shared(value, 0))
    try:
        if all(encode(sample) == encoder.encode(sample) for sample in _SAMPLES):
            return encode
    except (TypeError, ValueError):
        pass
    return encoder.encode
