"""numba's linkable code objects (``cuda.CUSource(code)``, ``cuda.PTXSource(code)``, ...).

kaiojit links files (``link=[path]``), so each object keeps its code in a file of its kind
under the temporary directory, named by the code's hash and written once; ``cuda.jit``'s
``link=`` passes that file on.
"""

from __future__ import annotations

import hashlib
import os
import tempfile


class LinkableCode:
    """Code to link into kernels, held in memory (``data``: text or bytes)."""

    suffix = ""
    kind = ""

    def __init__(self, data, name: str | None = None, setup_callback=None,
                 teardown_callback=None, nrt: bool = False):
        self.data = data
        self._name = name
        self.setup_callback = setup_callback
        self.teardown_callback = teardown_callback
        self.nrt = nrt
        self._path: str | None = None

    @property
    def name(self) -> str:
        return self._name or f"<unnamed-{self.kind}>"

    @property
    def path(self) -> str:
        """A file holding the code, for kaiojit's ``link=``."""
        if self._path is None:
            raw = self.data.encode() if isinstance(self.data, str) else bytes(self.data)
            digest = hashlib.blake2s(raw, digest_size=10).hexdigest()
            folder = os.path.join(tempfile.gettempdir(), "kaiojit-linkable")
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, f"{digest}{self.suffix}")
            if not os.path.exists(path):
                tmp = f"{path}.{os.getpid()}"
                with open(tmp, "wb") as f:
                    f.write(raw)
                os.replace(tmp, path)
            self._path = path
        return self._path


class PTXSource(LinkableCode):
    suffix, kind = ".ptx", "ptx"


class CUSource(LinkableCode):
    suffix, kind = ".cu", "cu"


class Cubin(LinkableCode):
    suffix, kind = ".cubin", "cubin"


class Fatbin(LinkableCode):
    suffix, kind = ".fatbin", "fatbin"


class LTOIR(LinkableCode):
    suffix, kind = ".ltoir", "ltoir"


class Object(LinkableCode):
    suffix, kind = ".o", "object"


class Archive(LinkableCode):
    suffix, kind = ".a", "archive"


def link_paths(link) -> list:
    """``link=`` with each linkable code object replaced by its file."""
    if link is None or isinstance(link, (str, os.PathLike, LinkableCode)):
        link = [link] if link is not None else []
    return [f.path if isinstance(f, LinkableCode) else f for f in link]
