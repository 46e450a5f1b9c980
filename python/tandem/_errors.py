"""tandem's errors: every failed call of the C++ SDK raises a tandem.Error.

`Error.code` is the absl/gRPC status code (an int, as in the C ABI: 3 =
INVALID_ARGUMENT, 9 = FAILED_PRECONDITION, 14 = UNAVAILABLE, ...) and
`Error.code_name` its name. Each code has its own subclass, so callers can
catch what they handle (`except tandem.UnavailableError: retry later`);
InvalidArgumentError is also a ValueError and UnimplementedError a
NotImplementedError. Bad input found before any C++ runs (not a float array,
wrong shape, NaN) raises plain TypeError / ValueError.
"""

CODE_NAMES = {
    1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND", 6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION", 10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED",
    13: "INTERNAL", 14: "UNAVAILABLE", 15: "DATA_LOSS", 16: "UNAUTHENTICATED",
}


class Error(Exception):
    """A non-OK status of tandem's C++ code."""

    code = 2

    def __init__(self, message, code=None):
        if code is not None:
            self.code = code
        self.message = message
        super().__init__(f"{self.code_name}: {message}")

    @property
    def code_name(self):
        return CODE_NAMES.get(self.code, f"CODE_{self.code}")


class CancelledError(Error):
    code = 1


class UnknownError(Error):
    code = 2


class InvalidArgumentError(Error, ValueError):
    code = 3


class DeadlineExceededError(Error):
    code = 4


class NotFoundError(Error):
    code = 5


class AlreadyExistsError(Error):
    code = 6


class PermissionDeniedError(Error):
    code = 7


class ResourceExhaustedError(Error):
    code = 8


class FailedPreconditionError(Error):
    code = 9


class AbortedError(Error):
    code = 10


class OutOfRangeError(Error):
    code = 11


class UnimplementedError(Error, NotImplementedError):
    code = 12


class InternalError(Error):
    code = 13


class UnavailableError(Error):
    code = 14


class DataLossError(Error):
    code = 15


class UnauthenticatedError(Error):
    code = 16


_BY_CODE = {cls.code: cls for cls in Error.__subclasses__()}


def from_status(code, message):
    """The exception for status `code` (called by the bindings)."""
    cls = _BY_CODE.get(code)
    return cls(message) if cls is not None else Error(message, code)
