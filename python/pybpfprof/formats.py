"""Output formats and the file name endings that choose them, as the CLI maps them.

The one table here mirrors the C++ registry (userspace/export/exporter.cpp: kFormats, in
that order, and each exporter's extensions()). tests/python/test_api.py checks it against
the built binary's own list (the message of ``pybpfprof -o x.unknown``) and against the
sources, so the two cannot drift apart.
"""

# (format name, its file name endings without the leading dot; the first is the default)
FORMATS = (
    ("speedscope", ("speedscope.json", "json")),
    ("collapsed", ("folded", "collapsed")),
    ("html", ("html", "htm")),
    ("pprof", ("pb.gz", "pprof")),
    ("svg", ("svg",)),
    ("pbp", ("pbp",)),
)


def format_names():
    """The format names, in the CLI's order (the first is the default)."""
    return [name for name, _ in FORMATS]


def default_extension(fmt):
    """The default file name ending of a format (``"pb.gz"`` for pprof), or None."""
    for name, exts in FORMATS:
        if name == fmt:
            return exts[0]
    return None


def format_for_path(path):
    """The format whose ending ``path`` has, case-insensitively; the longest ending wins
    (``x.speedscope.json``: speedscope, ``x.pb.gz``: pprof). None when none matches."""
    lower = str(path).lower()
    best, longest = None, 0
    for name, exts in FORMATS:
        for ext in exts:
            end = "." + ext
            if len(end) > longest and lower.endswith(end):
                best, longest = name, len(end)
    return best


def known_extensions_text():
    """Every ending, for messages: ``.speedscope.json, .json, ... or .pprof`` (the text of
    known_extensions_text() in exporter.cpp)."""
    ends = ["." + ext for _, exts in FORMATS for ext in exts]
    if len(ends) == 1:
        return ends[0]
    return ", ".join(ends[:-1]) + " or " + ends[-1]
