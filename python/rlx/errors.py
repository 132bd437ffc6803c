"""rlx.Error and one subclass per rlx_status; each carries rlx_last_error()."""


class Error(Exception):
    """A failed rlx call. ``status`` is the rlx_status name ("RLX_ERR_SHAPE"),
    ``str(e)`` rlx's message naming what and where."""
    status = "RLX_ERR"


class InvalidError(Error, ValueError):
    """RLX_ERR_INVALID: a bad argument (an unknown name, a bad index)."""
    status = "RLX_ERR_INVALID"


class ShapeError(Error, ValueError):
    """RLX_ERR_SHAPE: shapes that do not fit the op or the declared input."""
    status = "RLX_ERR_SHAPE"


class DtypeError(Error, TypeError):
    """RLX_ERR_DTYPE: a dtype the op or the input does not take."""
    status = "RLX_ERR_DTYPE"


class UnsupportedError(Error):
    """RLX_ERR_UNSUPPORTED: valid, but not something rlx does."""
    status = "RLX_ERR_UNSUPPORTED"


class NoMemError(Error, MemoryError):
    """RLX_ERR_NOMEM: out of memory."""
    status = "RLX_ERR_NOMEM"


class IoError(Error):
    """RLX_ERR_IO: a file could not be read."""
    status = "RLX_ERR_IO"


class FormatError(Error):
    """RLX_ERR_FORMAT: a malformed file or text."""
    status = "RLX_ERR_FORMAT"


class DeviceError(Error):
    """RLX_ERR_DEVICE: the device failed or is absent."""
    status = "RLX_ERR_DEVICE"


class InternalError(Error):
    """RLX_ERR_INTERNAL: a bug in rlx."""
    status = "RLX_ERR_INTERNAL"


# Indexed by rlx_status (RLX_ERR_INVALID = 1, ...), in rlx.h's order.
BY_STATUS = [None, InvalidError, ShapeError, DtypeError, UnsupportedError, NoMemError, IoError,
             FormatError, DeviceError, InternalError]


def from_status(status, message):
    cls = BY_STATUS[status] if 0 < status < len(BY_STATUS) else Error
    return cls(message)
