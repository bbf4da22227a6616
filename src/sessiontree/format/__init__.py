"""The session file format and the file work under it: the bottom layer.

The format: the JSONL codec (:mod:`.codec`: read formats 1-4 into format 4,
write format 4 byte for byte), JSON as JavaScript writes it (:mod:`.jsonio`),
entry and session ids (:mod:`.ids`), the typed shapes of headers, entries and
messages (:mod:`.types`), the upgrades 1 -> 4 (:mod:`.upgrade`) and the bounds
of what may be written (:mod:`.bounds`). The file work every layer above
builds on: file primitives such as locks, atomic replace and reading a first
line (:mod:`.files`), upgrading a file in place (:mod:`.migrate`), output
files that refuse special targets (:mod:`.outfile`) and pausing the garbage
collector around bulk parsing (:mod:`.gcpause`).

It imports nothing of sessiontree but :mod:`sessiontree.errors`. Importing the
package gives the codec's public names (``parse_session``,
``read_session_file``, ``serialize_session``, ...).
"""

from sessiontree.format.codec import *  # noqa: F403
from sessiontree.format.codec import __all__ as __all__
