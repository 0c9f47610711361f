"""Errors raised on bad input. Each names what was wrong and the offending value."""


class RequestError(ValueError):
    """A pod's request for managed resources cannot be understood.

    ``container`` and ``field`` locate the problem, ``value`` is the raw input.
    """

    def __init__(self, message: str, *, container: str = "", field: str = "", value: object = None):
        self.container = container
        self.field = field
        self.value = value
        where = ", ".join(
            part
            for part in (
                f"container {container!r}" if container else "",
                f"field {field!r}" if field else "",
                f"value {value!r}" if value is not None else "",
            )
            if part
        )
        super().__init__(f"{message} ({where})" if where else message)


class InventoryError(ValueError):
    """A node's device inventory (annotation, file or API body) cannot be understood."""


class AnnotationError(ValueError):
    """A pod's device-allocation annotation cannot be decoded or written.

    Raised instead of guessing, so a corrupt annotation never turns into a wrong usage
    count. ``value`` is the raw annotation (or the offending part of it).
    """

    def __init__(self, message: str, *, value: object = None):
        self.value = value
        super().__init__(f"{message} (value {value!r})" if value is not None else message)
