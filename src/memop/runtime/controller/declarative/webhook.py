"""The validating webhook of a declarative controller's kind: the typed parse, then the
user's ``validate(new, old)``.

An object that fails the parse is refused with the parse's field errors (``422 Invalid``, the
API server's own words and paths); ``validate`` returns warnings, or raises: a
:class:`~memop.runtime.webhook.declarations.ValidationError` as it is, an
:class:`~memop.runtime.api.errors.InvalidObject` with its field errors, any other ValueError
(a Pydantic ValidationError among them) as one error on ``spec``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from memop.runtime.api.errors import InvalidObject
from memop.runtime.webhook.declarations import AdmissionRequest, FieldError, ValidationError

Validate = Callable[[Any, Any], Iterable[str] | None]


class _Parses(Protocol):
    @classmethod
    def parse(cls, obj: Mapping[str, Any]) -> Any: ...


class TypedValidator:
    """A :class:`~memop.runtime.webhook.declarations.Validator` for ``kind`` and ``validate``."""

    def __init__(self, kind: _Parses, validate: Validate) -> None:
        self._kind = kind
        self._validate = validate

    async def validate_create(self, obj: dict[str, Any], request: AdmissionRequest) -> Sequence[str]:
        return self._check(obj, None)

    async def validate_update(
        self, old: dict[str, Any], new: dict[str, Any], request: AdmissionRequest
    ) -> Sequence[str]:
        return self._check(new, old)

    async def validate_delete(self, obj: dict[str, Any], request: AdmissionRequest) -> Sequence[str]:
        return ()

    def _check(self, new: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
        try:
            typed_new = self._kind.parse(new)
        except InvalidObject as invalid:
            raise ValidationError(invalid.errors) from None
        typed_old = None
        if old is not None:
            try:
                typed_old = self._kind.parse(old)
            except InvalidObject:
                typed_old = None  # an old object stored invalid: judge the new one alone
        try:
            warnings = self._validate(typed_new, typed_old)
        except ValidationError:
            raise
        except InvalidObject as invalid:
            raise ValidationError(invalid.errors) from None
        except ValueError as error:
            raise ValidationError([FieldError("spec", f"Invalid value: {error}")]) from None
        return [str(w) for w in warnings or ()]
