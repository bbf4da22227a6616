"""The session file format: bytes, JSON, ids, typed shapes and upgrades.

The bottom layer. It owns the JSONL codec (:mod:`.codec`: read formats 1-4
into format 4, write format 4 byte for byte), JSON as JavaScript writes it
(:mod:`.jsonio`), entry and session ids (:mod:`.ids`), the typed shapes of
headers, entries and messages (:mod:`.types`), the upgrades 1 -> 4
(:mod:`.upgrade`), the bounds of what may be written (:mod:`.bounds`), file
primitives (:mod:`.files`) and safe output files (:mod:`.outfile`).

It imports nothing of sessiontree but :mod:`sessiontree.errors`. Importing the
package gives the codec's public names (``parse_session``,
``read_session_file``, ``serialize_session``, ...), as the former module
``sessiontree.format`` did.
"""

from sessiontree.format.codec import *  # noqa: F403
from sessiontree.format.codec import __all__ as __all__
