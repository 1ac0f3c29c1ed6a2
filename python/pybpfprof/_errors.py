"""The exceptions of the pybpfprof package."""


class PybpfprofError(RuntimeError):
    """Base class of every error this package raises about profiling."""


class AgentUnavailableError(PybpfprofError):
    """No agent answers on the socket and this process cannot load BPF itself.

    ``socket_path`` is the socket that was tried, ``reason`` why the connection failed
    (``"No such file or directory"``, ...).
    """

    def __init__(self, message, socket_path=None, reason=None):
        super().__init__(message)
        self.socket_path = socket_path
        self.reason = reason


class ProfilingError(PybpfprofError):
    """The agent (or the pybpfprof binary) refused or failed the request.

    ``code`` is the agent's error code (``"bad_input"``, ``"forbidden"``,
    ``"cannot_profile"``, ``"limit"``, ``"internal"``, ``"protocol"``) or one of this
    client's: ``"nothing_found"``, ``"connection"`` (the agent went away or timed out),
    ``"exit_N"`` (the pybpfprof binary exited with status N). ``message`` is one line.
    """

    def __init__(self, message, code=None):
        text = message if not code else "%s [%s]" % (message, code)
        super().__init__(text)
        self.message = message
        self.code = code


class AgentProtocolError(ProfilingError):
    """The agent sent something this client cannot read (a broken frame, bad JSON, a limit)."""

    def __init__(self, message):
        super().__init__(message, "client_protocol")


class ProfilingWarning(UserWarning):
    """A ``warning`` or ``error`` event of the agent: something to know, the session went on."""
