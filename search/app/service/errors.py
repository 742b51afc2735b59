"""The error of a run setting a user can fix (shown as a 400 naming the field)."""

from __future__ import annotations


class SettingError(ValueError):
    """A user-fixable problem with one field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
